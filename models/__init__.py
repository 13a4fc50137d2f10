"""Siamese encoder, contrastive loss and verification metrics."""
