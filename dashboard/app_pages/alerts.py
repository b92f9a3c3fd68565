import streamlit as st

st.title("alerts")
