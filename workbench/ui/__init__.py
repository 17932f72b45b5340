"""The Streamlit app. The only package that imports streamlit."""
