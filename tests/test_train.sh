#!/bin/sh
# test_train.sh BUILD [part]: the `train` command end to end.
#   learn   the loss on the synthetic corpus falls from about ln(256) by a clear margin
#   resume  N steps + save + load + N steps print bit-identical losses to 2N straight steps
#           (dense with dropout, and MoE), on the in-memory corpus and on a token file; a
#           second resume of the same checkpoint leaves each step once in the losses file;
#           in bf16 too (the checkpoint's fp32 master weights rounded again on load)
#   bad     corrupt, truncated and mismatched checkpoints and data files, and unwritable
#           output paths (before training), exit 2 with a message
#   cap     a device cap (PL_DEVICE_MEM) halfway between the device peaks of recompute none
#           and full, each measured by the ledger under a cap too large to bind: none stops
#           with "out of device memory", full trains under it with none's losses
# Every failed check prints a line; the exit code is the number of failures (0: all passed).
B=${1:?usage: test_train.sh BUILD [learn|resume|bad]}
PART=${2:-all}
TRAIN=$B/bin/train
D=$(mktemp -d /tmp/pl-test-train-XXXXXX)
trap 'rm -rf "$D"' EXIT
trap 'rm -rf "$D"; exit 1' INT TERM HUP
FAILS=0

fail() {
    echo "FAIL: $*"
    FAILS=$((FAILS + 1))
}

# expect_exit2 NAME SUBSTRING CMD...: CMD must exit 2 and say SUBSTRING.
expect_exit2() {
    name=$1 want=$2
    shift 2
    out=$("$@" 2>&1)
    rc=$?
    [ $rc -eq 2 ] || fail "$name: exit code $rc, expected 2; output: $(echo "$out" | tail -3)"
    case $out in
    *"$want"*) ;;
    *) fail "$name: the message does not say \"$want\"; it says: $(echo "$out" | tail -2)" ;;
    esac
}

TINY="--d-model 32 --layers 2 --heads 4 --seq-len 32 --batch 4 --lr 0.003 --corpus-tokens 200000"

learn() {
    out=$($TRAIN --d-model 64 --layers 2 --heads 4 --seq-len 64 --batch 8 --lr 0.003 \
        --steps 150 --log-every 50 2>&1) || { fail "learn: train failed: $out"; return; }
    echo "$out" | grep summary
    # Initial loss ~ ln(vocab) for near-uniform predictions; then a fall of at least 2 nats.
    echo "$out" | awk '
        /^summary: loss/ { first = $3; last = $8; seen = 1 }
        END {
            if (!seen) { print "FAIL: learn: no summary line"; exit 1 }
            u = log(256)
            if (first < u - 0.3 || first > u + 0.3) {
                printf "FAIL: learn: first loss %s, expected about ln(256) = %.3f\n", first, u; bad = 1
            }
            if (last > first - 2.0) {
                printf "FAIL: learn: loss %s -> %s after 150 steps, expected a fall of at least 2\n", first, last; bad = 1
            }
            exit bad
        }' || FAILS=$((FAILS + 1))
}

# resume_case NAME FLAGS: 2N straight steps vs N + save + load (with no config flags) + N.
resume_case() {
    name=$1
    shift
    n=8
    $TRAIN "$@" --steps $((2 * n)) --losses "$D/$name.straight" >"$D/$name.log1" 2>&1 ||
        { fail "resume $name: straight run failed: $(tail -3 "$D/$name.log1")"; return; }
    $TRAIN "$@" --steps $n --save "$D/$name.ckpt" --losses "$D/$name.resumed" >"$D/$name.log2" 2>&1 ||
        { fail "resume $name: first half failed: $(tail -3 "$D/$name.log2")"; return; }
    data_flag=""
    case "$*" in *--data*) data_flag="--data $D/corpus.tok" ;; esac
    # the precision is not the checkpoint's (it holds fp32 master weights either way)
    case "$*" in *"--precision bf16"*) data_flag="$data_flag --precision bf16" ;; esac
    $TRAIN --load "$D/$name.ckpt" $data_flag --steps $n --losses "$D/$name.resumed" >"$D/$name.log3" 2>&1 ||
        { fail "resume $name: resumed run failed: $(tail -3 "$D/$name.log3")"; return; }
    grep -q "resuming at step $((n + 1))" "$D/$name.log3" || fail "resume $name: did not resume at step $((n + 1))"
    lines=$(wc -l <"$D/$name.resumed")
    [ "$lines" -eq $((2 * n)) ] || fail "resume $name: $lines losses written, expected $((2 * n))"
    if ! cmp -s "$D/$name.straight" "$D/$name.resumed"; then
        fail "resume $name: losses after resuming differ from the straight run (step, straight, resumed):"
        paste "$D/$name.straight" "$D/$name.resumed" | awk '$2 != $4 { print "    " $1, $2, $4 }' | head -5
    fi
    # Resuming the same checkpoint again (as after a crash past it) rewrites steps n+1..2n:
    # the losses file must hold each step once, not append a second copy.
    $TRAIN --load "$D/$name.ckpt" $data_flag --steps $n --losses "$D/$name.resumed" >"$D/$name.log4" 2>&1 ||
        { fail "resume $name: second resume failed: $(tail -3 "$D/$name.log4")"; return; }
    lines=$(wc -l <"$D/$name.resumed")
    [ "$lines" -eq $((2 * n)) ] || fail "resume $name: resumed twice, $lines losses in the file, expected $((2 * n))"
    cmp -s "$D/$name.straight" "$D/$name.resumed" ||
        fail "resume $name: resumed twice, the losses file differs from the straight run"
}

resume() {
    resume_case dense $TINY --dropout 0.1
    resume_case moe $TINY --experts 4 --top-k 2 --dropout 0.1
    resume_case bf16 $TINY --precision bf16 --dropout 0.1
    $B/bin/gencorpus --out "$D/corpus.tok" --tokens 50000 --seed 3 >/dev/null || fail "gencorpus failed"
    resume_case file $TINY --data "$D/corpus.tok"
}

bad() {
    $TRAIN $TINY --steps 2 --save "$D/good.ckpt" >/dev/null 2>&1 || { fail "bad: could not make a checkpoint"; return; }
    size=$(wc -c <"$D/good.ckpt")

    head -c $((size - 100)) "$D/good.ckpt" >"$D/trunc.ckpt"
    expect_exit2 "truncated checkpoint" "is truncated" $TRAIN --load "$D/trunc.ckpt" --steps 1
    head -c 100 "$D/good.ckpt" >"$D/short.ckpt"
    expect_exit2 "checkpoint shorter than its header" "shorter than its 512-byte header" $TRAIN --load "$D/short.ckpt" --steps 1

    cp "$D/good.ckpt" "$D/body.ckpt"
    printf '\377\377\377\377' | dd of="$D/body.ckpt" bs=1 seek=$((size - 1000)) conv=notrunc 2>/dev/null
    expect_exit2 "corrupt checkpoint body" "is corrupt: the parameters" $TRAIN --load "$D/body.ckpt" --steps 1

    cp "$D/good.ckpt" "$D/head.ckpt"
    printf '\100' | dd of="$D/head.ckpt" bs=1 seek=20 conv=notrunc 2>/dev/null
    expect_exit2 "corrupt checkpoint header" "header checksum does not match" $TRAIN --load "$D/head.ckpt" --steps 1

    cp "$D/good.ckpt" "$D/version.ckpt"
    printf '\007' | dd of="$D/version.ckpt" bs=1 seek=8 conv=notrunc 2>/dev/null
    expect_exit2 "checkpoint version" "format version 7" $TRAIN --load "$D/version.ckpt" --steps 1

    $B/bin/gencorpus --out "$D/small.tok" --tokens 1000 >/dev/null
    expect_exit2 "token file as checkpoint" "is not a paralab checkpoint" $TRAIN --load "$D/small.tok" --steps 1
    expect_exit2 "missing checkpoint" "cannot open checkpoint" $TRAIN --load "$D/none.ckpt" --steps 1
    expect_exit2 "mismatched config" "was trained with --d-model 32 but --d-model 64" $TRAIN --load "$D/good.ckpt" --d-model 64 --steps 1
    expect_exit2 "mismatched experts" "was trained with --experts 0 but --experts 4" $TRAIN --load "$D/good.ckpt" --experts 4 --steps 1
    expect_exit2 "mismatched batch" "was trained with --batch 4 but --batch 8" $TRAIN --load "$D/good.ckpt" --batch 8 --steps 1
    expect_exit2 "other corpus seed on resume" "was trained with --corpus-seed 1 but --corpus-seed 9" $TRAIN --load "$D/good.ckpt" --corpus-seed 9 --steps 1
    $B/bin/gencorpus --out "$D/other.tok" --tokens 50000 --seed 4 >/dev/null
    expect_exit2 "other data on resume" "was trained on other data" $TRAIN --load "$D/good.ckpt" --data "$D/other.tok" --steps 1

    # Output paths are checked before step 1, not after the training they would lose.
    for bad_path in "$D/no-such-dir/x.ckpt" "$D"; do
        out=$($TRAIN $TINY --steps 3 --save "$bad_path" 2>&1)
        rc=$?
        [ $rc -eq 2 ] || fail "unwritable --save $bad_path: exit code $rc, expected 2"
        case $out in
        *"--save: cannot write checkpoint"*) ;;
        *) fail "unwritable --save $bad_path: message: $(echo "$out" | tail -2)" ;;
        esac
        case $out in *"step "*) fail "unwritable --save $bad_path: it trained before refusing" ;; esac
    done
    echo "not a losses file" >"$D/other.txt"
    expect_exit2 "--losses file of something else on resume" "is not a 'step loss' line" $TRAIN --load "$D/good.ckpt" --losses "$D/other.txt" --steps 1
    grep -q "not a losses file" "$D/other.txt" || fail "--losses: a file that is not a losses file was changed"

    # Data files: short, corrupt, not a token file.
    expect_exit2 "data shorter than one batch" "shorter than one batch" $TRAIN --data "$D/small.tok" --batch 8 --seq-len 128 --steps 1
    cp "$D/small.tok" "$D/corrupt.tok"
    printf 'x' | dd of="$D/corrupt.tok" bs=1 seek=500 conv=notrunc 2>/dev/null
    expect_exit2 "corrupt data file" "checksum" $TRAIN --data "$D/corrupt.tok" --steps 1
    head -c 1000 "$D/small.tok" >"$D/trunc.tok"
    expect_exit2 "truncated data file" "is truncated" $TRAIN --data "$D/trunc.tok" --steps 1
    echo "some text that was never tokenized, long enough to fill a header......" >"$D/text.txt"
    expect_exit2 "text as data" "not a paralab token file" $TRAIN --data "$D/text.txt" --steps 1
    expect_exit2 "vocab smaller than data" "use --vocab 256 or more" $TRAIN --data "$D/small.tok" --vocab 100 --batch 1 --seq-len 8 --steps 1
}

# The device bytes at peak that `train` reports under a cap (pl_mem_print's device line).
device_peak() {
    sed -n 's/^  device: [0-9]* bytes now, \([0-9]*\) at peak.*/\1/p' "$1"
}

cap() {
    args="--steps 2 --batch 4 --layers 4 --corpus-tokens 20000"
    for r in none full; do
        PL_DEVICE_MEM=1TB $TRAIN $args --recompute $r --losses "$D/$r.loss" >"$D/$r.out" 2>&1 ||
            fail "recompute $r under a 1 TB cap: $(tail -3 "$D/$r.out")"
    done
    none=$(device_peak "$D/none.out")
    full=$(device_peak "$D/full.out")
    if [ -z "$none" ] || [ -z "$full" ] || [ "$full" -ge "$none" ]; then
        fail "device peaks: none '$none', full '$full' bytes: expected two, full's the lower"
        return
    fi
    half=$(((none + full) / 2))
    rc=0
    PL_DEVICE_MEM=$half $TRAIN $args --recompute none >"$D/none-cap.out" 2>&1 || rc=$?
    [ $rc -eq 1 ] && grep -q "out of device memory: this rank's cap is $half bytes" "$D/none-cap.out" ||
        fail "recompute none under a cap of $half bytes (its peak $none): exit $rc, expected 1 with out of device memory"
    PL_DEVICE_MEM=$half $TRAIN $args --recompute full --losses "$D/full-cap.loss" >"$D/full-cap.out" 2>&1 ||
        fail "recompute full under a cap of $half bytes (its peak $full): $(tail -3 "$D/full-cap.out")"
    cmp -s "$D/none.loss" "$D/full-cap.loss" ||
        fail "recompute full under the cap: losses differ from none's"
}

case $PART in
learn) learn ;;
resume) resume ;;
bad) bad ;;
cap) cap ;;
all) learn; resume; bad; cap ;;
*) echo "unknown part '$PART' (learn, resume, bad, cap or all)"; exit 2 ;;
esac

if [ $FAILS -ne 0 ]; then
    echo "test_train $PART: $FAILS checks failed"
    exit 1
fi
echo "test_train $PART: all checks passed"
