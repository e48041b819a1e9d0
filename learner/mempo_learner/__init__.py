"""mempo's torch reference learner (docs/learner.md): `python -m mempo_learner --model DIR`."""
__version__ = "0.1.0"
