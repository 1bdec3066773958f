# Session 24, call 1: session 23's prepared docs/results/session23_2xH100/scripts/next_c2.sh, run as it is (its logs
# are in ../c1), with the trees made by
#   scripts/ab_trees.sh base=95c3f8a new=95c3f8a+docs/results/session23_2xH100/combine-one-role_ee4b67a.patch
# (main had moved past the 660373c that script names only in host code, docs and the trace stamps).
# run(kind nvidia-h100-x2, carry [".deps", ".ab"])
exec bash docs/results/session23_2xH100/scripts/next_c2.sh
