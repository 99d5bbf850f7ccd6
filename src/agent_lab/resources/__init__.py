"""Package data shipped with Agent Lab, such as the sample search corpus in ``corpus/``."""
