"""minibert: the BERT family as configurations of one small, readable encoder."""
