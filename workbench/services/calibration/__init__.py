"""SMEs calibrate the judge: the sample, blind labelling, the agreement report and the gate
(workflow), and whether the judge's qrels rank systems as the human qrels do (rank_agreement).
"""
