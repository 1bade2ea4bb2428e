#!/bin/bash
# The kit adds lines only: the series' files as the harness applies the
# mergeable parts, against the same files with the kit applied too.
# usage: docs/results/kit-adds-only/make.sh BASE
set -e
BASE=$1; OUT=docs/results/kit-adds-only
cd $(git rev-parse --show-toplevel)
PRISTINE=${ZDINIT_CACHE:-$HOME/.cache/zdinit}/pristine/linux-source-$BASE
T=$(mktemp -d)
mkdir -p $T/series $T/kit
mergeable=$(for p in templates store-policy parallel onlining contiguity; do sed "s#^#patches/linux-$BASE-$p/#" patches/linux-$BASE-$p/series; done)
kit=$(sed "s#^#patches/linux-$BASE-kit/#" patches/linux-$BASE-kit/series)
files=$(grep -h '^+++ b/' $mergeable $kit | sed 's#^+++ b/##' | sort -u)
for f in $files; do for d in series kit; do mkdir -p $T/$d/$(dirname $f); [ -f $PRISTINE/$f ] && cp $PRISTINE/$f $T/$d/$f; done; done
for p in $mergeable; do patch -d $T/series -p1 -s -N --no-backup-if-mismatch -i $PWD/$p; patch -d $T/kit -p1 -s -N --no-backup-if-mismatch -i $PWD/$p; done
for p in $kit; do patch -d $T/kit -p1 -s -N --no-backup-if-mismatch -i $PWD/$p; done
{
echo "# diff -u <series> <series + kit>, files patched with patch -p1 as the harness applies them"
echo "# mergeable: $(echo $mergeable | wc -w) patches; kit: $(echo $kit | wc -w) patches"
for f in $files; do
  [ -f $T/kit/$f ] || continue
  if ! cmp -s $T/series/$f $T/kit/$f; then
    a=$(diff $T/series/$f $T/kit/$f | grep -c '^>' || true)
    r=$(diff $T/series/$f $T/kit/$f | grep -c '^<' || true)
    echo "# $f: $a lines added, $r removed"
  fi
done
(cd $T && diff -ruN series kit | sed -E "s/^(---|\+\+\+) ([^\t]*)\t.*/\1 \2/") || true
} > $OUT/kit-diff-$BASE.txt
rm -rf $T
grep '^# ' $OUT/kit-diff-$BASE.txt
