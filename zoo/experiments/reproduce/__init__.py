"""Paper reproductions that train catalogue entries (`zoo reproduce PAPER`).

`zoo.experiments.reproduce.liberty_or_depth`: Liberty or Depth (Fig. 1, eq. 14-17, the depth sweep). The analyses
they call (Gaussian fits, KL and W2, closed-form product covariances) train nothing and live in
`zoo.experiments.analysis`.
"""
