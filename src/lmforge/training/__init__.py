"""Pretraining and fine-tuning with Lightning: recipes, the data module, the training module, the stage runners."""
