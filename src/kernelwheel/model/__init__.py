"""The vocabulary: variants, kernel projects (build.toml) and the recipes matrix, as frozen values
with one parser and one formatter each."""
