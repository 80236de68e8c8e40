#!/bin/bash
# spv_same.sh: whether two source trees' kernels compile to the same code
# under a list of specializations (gpu/PERF.md run 33: a change meant for
# one weight type must leave every other type's code as it was).  A module
# carries every type's branches, so two trees' modules differ as a whole,
# and spirv-opt's specialization of them keeps the shape of the code around
# the constants (it does not reduce two modules of the same folded code to
# the same words).  So the specialization happens in the source: each line
# of SPECS is "SHADER ID:VALUE ..." (SHADER: shaders/SHADER.comp, or
# NAME_ll for its -DLL build); in a copy of each tree's shaders/ every
# `layout(constant_id = X) const T N = D;` becomes the constant VALUE of
# X's id (D where the line has none; local_size_x_id likewise), glslc -O
# folds the rest as it compiles, and the two disassemblies are compared
# with ids renamed canonically (below).  Prints one line per DIFF, then
# "N same, N differ, N skipped" (SKIP: an extended regex; matching lines
# are not compared, e.g. SKIP=' 1:13( |$)| 2:13( |$)' for Q5_K's).
#   tests/bench/spv_same.sh SPECS TREE_A TREE_B
# SPECS can come from tests/bench/spv_specs.c (the specializations a run
# creates), or from `glmchat bench --plan` listings (their "spec=" fields).
# SPV_OPT: spirv-opt passes run on both sides' modules before they are
# compared (e.g. --eliminate-dead-members: push-constant members no code
# reads go, and the rest are numbered again).  Needs glslc, spirv-dis and
# spirv-opt (Debian: spirv-tools) and perl.
set -u
[ $# = 3 ] || { echo "usage: spv_same.sh SPECS TREE_A TREE_B" >&2; exit 2; }
specs=$1
for t in glslc spirv-dis perl; do
    command -v $t >/dev/null || { echo "spv_same.sh: $t not found" >&2; exit 2; }
done
tmp=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT; [ -n "${KEEP:-}" ] && echo "kept $tmp" >&2
# $tmp/{a,b}: the shaders with every spec constant a macro SV_<its name>
# (the id's name in the pc_*.h headers), else its default
for side in a b; do
    tree=$2
    [ $side = b ] && tree=$3
    mkdir -p "$tmp/$side"
    cp "$tree"/shaders/*.comp "$tree"/shaders/*.glsl "$tree"/shaders/*.h "$tmp/$side/"
    perl -0pi -e 's/layout\s*\(\s*constant_id\s*=\s*(\w+)\s*\)\s*const\s+(\w+)\s+(\w+)\s*=\s*([^;]+);/#ifdef SV_$1\nconst $2 $3 = $2(SV_$1);\n#else\nconst $2 $3 = $4;\n#endif/g;
                  s/layout\s*\(\s*local_size_x_id\s*=\s*(\w+)\s*\)\s*in;/#ifdef SV_$1\nlayout(local_size_x = SV_$1) in;\n#else\nlayout(local_size_x = 64) in;\n#endif/g' \
        "$tmp/$side"/*.comp "$tmp/$side"/*.glsl
    # id -> every enum name of that value (a module declares each id once)
    perl -ne 'print "$2 $1\n" while /PC_ENUM\((\w+),\s*(\d+)\)/g' "$tmp/$side"/pc_*.h >"$tmp/$side.ids"
done
# glslc -D flags of spec values $2 for side $1
defines() {
    local side=$1 kv
    for kv in $2; do
        awk -v id="${kv%%:*}" -v v="${kv#*:}" '$1 == id { printf "-DSV_%s=%su ", $2, v }' "$tmp/$side.ids"
    done
}
# The canonical form of `spirv-dis --raw-id` text: the ids the functions
# define (and the global variables) named by their order of first use
# there, the others (types, constants) by their definitions, recursively;
# the declarations before the first function sorted (their order follows
# the source's order of first use, which the two trees may not share).
cat >"$tmp/canon.pl" <<'PERL'
my (@pre, @body, %def, %name);
my $in_body = 0;
while (<>) {
    next if /^\s*;/ || /^\s*Op(Name|MemberName|Source|SourceExtension|String|Line|ModuleProcessed)\b/;
    s/^\s+//;
    $in_body = 1 if /OpFunction\b/;
    if ($in_body) { push @body, $_ } else { push @pre, $_; $def{$1} = $2 if /^%(\d+) = (.*)$/ }
}
# (a function's local variables, declared at its start in the order their
# inlined functions came, named at their first use and sorted)
my $local = qr/^%\d+ = OpVariable %\d+ Function\b/;
# (definitions nothing refers to -- dead locals, unused constants -- dropped)
my %used;
for (@pre, @body) { my $l = $_; $l =~ s/^%\d+ = //; $used{$1} = 1 while $l =~ /%(\d+)/g }
@pre = grep { !/^%(\d+) = Op(Constant|Variable|Type)/ || $used{$1} } @pre;
@body = grep { !/^%(\d+) = OpVariable/ || $used{$1} } @body;
my $n = 0;
for (grep { !/$local/ } @body) {
    while (/%(\d+)/g) { $name{$1} //= 'b' . $n++ unless exists $def{$1} && $def{$1} !~ /^OpVariable/ }
}
sub nm {
    my ($id, $depth) = @_;
    return $name{$id} if defined $name{$id};
    my $d = $def{$id};
    return "?$id" if !defined $d || $depth > 64;   # undefined, or a cycle
    $d =~ s/%(\d+)/'{' . nm($1, $depth + 1) . '}'/ge;
    return $name{$id} = $d;
}
sub subst { my $l = shift; $l =~ s/%(\d+)/'%' . nm($1, 0)/ge; return $l }
print sort map { subst($_) } @pre;
my @locals;
for (@body) {
    if (/$local/) { push @locals, subst($_); next }
    print sort @locals;
    @locals = ();
    print subst($_);
}
PERL
# the canonical disassembly of SHADER ($2) in side $1 under values $3
special() {
    local src=$2 ll=
    case $src in *_ll) src=${src%_ll} ll=-DLL ;; esac
    # shellcheck disable=SC2046
    glslc --target-env=vulkan1.2 -O $ll -I"$tmp/$1" $(defines "$1" "$3") -o "$tmp/$1.spv" "$tmp/$1/$src.comp" &&
        if [ -n "${SPV_OPT:-}" ]; then
            # shellcheck disable=SC2086
            spirv-opt $SPV_OPT "$tmp/$1.spv" -o "$tmp/$1.opt.spv" && mv "$tmp/$1.opt.spv" "$tmp/$1.spv"
        fi &&
        spirv-dis --raw-id "$tmp/$1.spv" | perl "$tmp/canon.pl"
}
same=0 differ=0 skipped=0
while read -r shader values; do
    [ -n "$shader" ] || continue
    if [ -n "${SKIP:-}" ] && echo " $values" | grep -Eq "$SKIP"; then
        skipped=$((skipped + 1))
        continue
    fi
    if ! special a "$shader" "$values" >"$tmp/a.txt" || ! special b "$shader" "$values" >"$tmp/b.txt"; then
        echo "ERROR $shader $values"
        differ=$((differ + 1))
    elif cmp -s "$tmp/a.txt" "$tmp/b.txt"; then
        same=$((same + 1))
    else
        echo "DIFF $shader $values ($(diff "$tmp/a.txt" "$tmp/b.txt" | grep -c '^[<>]') lines)"
        differ=$((differ + 1))
    fi
done <"$specs"
echo "$same same, $differ differ, $skipped skipped"
[ "$differ" = 0 ]
