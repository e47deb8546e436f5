"""The ground floor: chess encodings and shared contracts every stage stands on."""
