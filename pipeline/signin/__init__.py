"""What the chat's browser needs that is neither the engine's own nor a command's: the browser
profile's lock (profile.py), the saved login read and written (saved.py) and kept fresh
(refresh.py). Below the runs (batch, setup, wiring), which all use it, and above the engines."""
