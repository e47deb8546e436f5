"""A local web board for the trained models: `python -m eval.web` (eval/web/__main__.py).

http_server.py serves the page (static/: hand-written HTML, JS and CSS, nothing downloaded at run
time) and the JSON API: api.py over the models, game_records.py for the game helpers, params.py
checking the parameters; hosts.py says which requests come from the server's own page,
cancel.py when an answer has nobody left waiting for it; models.py finds and loads the
models.
"""
