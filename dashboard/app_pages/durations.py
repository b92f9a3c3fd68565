import streamlit as st

st.title("durations")
