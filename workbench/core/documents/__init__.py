"""Documents as character spans: named chunkings that return spans (never copies of text),
span arithmetic and span-anchored qrels, and near-duplicate chunks for label propagation.
"""
