import streamlit as st

st.title("checklist")
