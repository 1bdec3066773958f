#!/usr/bin/env bash
# Makes the .ab/<tree> folders that scripts/device_call.sh's call_build_trees builds on the device: each a git
# archive of one revision, with patch files applied by `patch -p1`. (`git apply` inside .ab, a folder this
# checkout ignores, applies nothing and still succeeds: session 23's first call ran main against main so.)
#
#   scripts/ab_trees.sh base=main new=main+docs/results/x/a.patch[+b.patch] [other=exp/branch]
#
# Fails when a patch does not apply or leaves its tree unchanged.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
root=$PWD
tree_sum() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 md5sum | md5sum); }
rm -rf .ab
for spec in "$@"; do
  name=${spec%%=*}
  rest=${spec#*=}
  rev=${rest%%+*}
  if [ "$name" = "$spec" ] || [ -z "$rev" ]; then
    echo "ab_trees: expected NAME=REV[+PATCH...], got '$spec'" >&2
    exit 2
  fi
  mkdir -p ".ab/$name"
  git archive "$rev" -- . ":(exclude)docs/results" | tar -x -C ".ab/$name"  # the results: 16 MB a tree
  [ "$rest" = "$rev" ] && { echo ".ab/$name: $(git rev-parse --short "$rev")"; continue; }
  IFS=+ read -ra patches <<<"${rest#*+}"
  for patch_file in "${patches[@]}"; do
    before=$(tree_sum ".ab/$name")
    (cd ".ab/$name" && patch -p1 --forward --batch -s <"$root/$patch_file") ||
      { echo "ab_trees: $patch_file does not apply to $rev" >&2; exit 1; }
    [ "$(tree_sum ".ab/$name")" != "$before" ] || { echo "ab_trees: $patch_file changed nothing" >&2; exit 1; }
  done
  echo ".ab/$name: $(git rev-parse --short "$rev") + ${patches[*]}"
done
