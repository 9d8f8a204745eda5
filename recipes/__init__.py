"""The supported build matrix as data (torch.toml, cuda.toml), installed as
``kernelwheel.recipe_data``. Read it with :func:`kernelwheel.model.recipes.load_recipes`; the
schema is in README.md beside this file.
"""
