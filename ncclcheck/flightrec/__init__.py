"""PyTorch's flight recorder, read safely and across ranks: who never arrived at a collective.

``load`` recognises a dump by its content (pickle or JSON), reads it without running any code
and turns every format version's entries into one shape; ``analyze`` compares the ranks of each
process group and names the first collective where they disagree.
"""
