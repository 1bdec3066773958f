# Session 28, c3: docs/results/session27_2xH100/scripts/next_ll_one_role.sh (on main), run as it is on branch
# exp/ll-one-role-min (1ed4bef; the script copied into that tree untracked): run(kind nvidia-h100-x2, carry [".deps"]),
#   bash docs/results/session27_2xH100/scripts/next_ll_one_role.sh
exec bash docs/results/session27_2xH100/scripts/next_ll_one_role.sh
