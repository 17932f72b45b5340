"""A project as a whole: create and open it (lifecycle), the demo's pipeline (demo), what it holds
and which step comes next (status), and deleting runs, pools and chunkings (deletion).
"""
