"""A local web board for the trained models: `python -m eval.web` (eval/web/__main__.py).

server.py serves the page (static/: hand-written HTML, JS and CSS, nothing downloaded at run
time) and the JSON API of api.py; models.py finds and loads the models.
"""
