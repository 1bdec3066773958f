# Session 29 c1: run(kind nvidia-h100-x2, carry [".deps"]) on branch exp/ar-proxy-pieces rebased onto main d5eeae4.
# It ran session 28's prepared driver unchanged (a copy of it then; its call name, next_ar_proxy_pieces, names c1's
# results tar): the suites with the pieces, racecheck / memcheck, and the A/B tables in c1/ab.
exec bash docs/results/session28_2xH100/scripts/next_ar_proxy_pieces.sh
