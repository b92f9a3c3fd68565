import streamlit as st

st.title("overview")
