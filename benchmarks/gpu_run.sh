#!/usr/bin/env bash
# One call on a GPU machine without network (issue 35 item 4: steps per second; issue 32 item 6: the k-tied MLP and
# the variance-networks LeNet-5 on USPS at the papers' settings). From the repository root:
#
#   OUT=/some/folder bash benchmarks/gpu_run.sh
#
# 1. installs the wheels in .whl/ (packages the machine lacks) into $WHEEL_SITE (default /tmp/site), without
#    network, and puts it and the repository first on PYTHONPATH;
# 2. prints the GPUs (nvidia-smi -L), python's and the packages' versions and JAX's devices;
# 3. runs benchmarks/gpu_steps.py into $OUT/speed (gpu_steps.md, gpu_steps.csv) under `timeout $SPEED_TIMEOUT`
#    (170 s; $SPEED_ARGS are added to its options, e.g. --tiny);
# 4. runs the two reproduction commands side by side, $KT_CMD writing $KT_DIR and $VN_CMD writing $VN_DIR, each
#    under its own `timeout` ($KT_TIMEOUT, $VN_TIMEOUT: 240 s), each logged to $KT_DIR.log / $VN_DIR.log;
# 5. packs each folder with its log into $OUT/kt.tar.gz and $OUT/vn.tar.gz.
# Everything it prints also goes to $OUT/log.txt. A part that fails is reported and the next part runs.
# Environment: PYTHON (default python3); XLA_PYTHON_CLIENT_PREALLOCATE is set to false (two jobs share the GPU).
set -u

OUT=${OUT:?set OUT to the folder that receives the results}
PY=${PYTHON:-python3}
WHEEL_SITE=${WHEEL_SITE:-/tmp/site}
SPEED_TIMEOUT=${SPEED_TIMEOUT:-170}
SPEED_ARGS=${SPEED_ARGS:-}
KT_DIR=${KT_DIR:-/tmp/kt}
VN_DIR=${VN_DIR:-/tmp/vn}
KT_CMD=${KT_CMD:-"$PY -m zoo.cli reproduce k-tied --full --data .data/usps5k.npz --out $KT_DIR"}
VN_CMD=${VN_CMD:-"$PY -m zoo.cli reproduce variance-networks --full --data .data/usps5k.npz --out $VN_DIR"}
KT_TIMEOUT=${KT_TIMEOUT:-240}
VN_TIMEOUT=${VN_TIMEOUT:-240}
export PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false

say() { echo "=== $(date -u +%H:%M:%S) $*"; }

install_wheels() {
  if ! compgen -G ".whl/*.whl" > /dev/null; then
    say "no wheels in .whl/: nothing installed"
    return 0
  fi
  ls -l .whl/
  if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WHEEL_SITE" \
      .whl/*.whl; then
    # no pip: a pure-Python wheel (py3-none-any, all of these) is a zip of what goes on the path
    say "pip failed: unpacking the wheels into $WHEEL_SITE instead"
    "$PY" - "$WHEEL_SITE" .whl/*.whl <<'EOF'
import sys, zipfile
for wheel in sys.argv[2:]:
    zipfile.ZipFile(wheel).extractall(sys.argv[1])
    print("unpacked", wheel)
EOF
  fi
}

versions() {
  nvidia-smi -L || echo "nvidia-smi failed or is missing"
  command -v "$PY"
  "$PY" --version
  "$PY" - <<'EOF'
import importlib
for name in ("jax", "jaxlib", "numpyro", "haiku", "optax", "arviz", "xarray", "numpy", "scipy", "sklearn"):
    try:
        module = importlib.import_module(name)
        print(f"{name:10s} {getattr(module, '__version__', '?'):12s} {module.__file__}")
    except Exception as err:  # a missing package is reported, the rest still listed
        print(f"{name:10s} MISSING: {type(err).__name__}: {err}")
import jax
print("devices:", jax.devices())
EOF
}

# job NAME DIR TIMEOUT CMD: CMD under `timeout`, its output in DIR.log, its exit status and seconds at the log's end
job() {
  local name=$1 dir=$2 limit=$3 cmd=$4 start=$SECONDS rc
  [ -e "$dir" ] && say "$name: $dir exists already (it is packed as the job leaves it)"
  say "$name starts (timeout $limit s): $cmd"
  timeout -k 10 "$limit" bash -c "$cmd" > "$dir.log" 2>&1
  rc=$?
  echo "exit status $rc after $((SECONDS - start)) s$([ "$rc" = 124 ] && echo " (timed out)")" >> "$dir.log"
  say "$name finished: exit status $rc after $((SECONDS - start)) s"
}

# pack NAME DIR: $OUT/NAME.tar.gz of DIR and DIR.log (those that exist)
pack() {
  local name=$1 dir=$2 parts=()
  [ -e "$dir" ] && parts+=("$(basename "$dir")")
  [ -e "$dir.log" ] && parts+=("$(basename "$dir").log")
  if [ ${#parts[@]} -eq 0 ]; then
    say "$name: nothing to pack"
    return 1
  fi
  tar -czf "$OUT/$name.tar.gz" -C "$(dirname "$dir")" "${parts[@]}" && ls -l "$OUT/$name.tar.gz"
}

# part NAME COMMAND...: run one part, say how it ended, never stop the script
part() {
  local name=$1 start=$SECONDS rc
  shift
  say "$name"
  "$@"
  rc=$?
  say "$name: exit status $rc after $((SECONDS - start)) s"
}

main() {
  say "gpu_run.sh in $PWD, results in $OUT"
  part "install wheels" install_wheels
  export PYTHONPATH="$WHEEL_SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
  part "versions" versions
  # shellcheck disable=SC2086  # SPEED_ARGS: options, split on purpose
  part "steps per second" timeout -k 10 "$SPEED_TIMEOUT" "$PY" benchmarks/gpu_steps.py --out "$OUT/speed" $SPEED_ARGS
  say "reproductions, side by side"
  job k-tied "$KT_DIR" "$KT_TIMEOUT" "$KT_CMD" &
  job variance-networks "$VN_DIR" "$VN_TIMEOUT" "$VN_CMD" &
  wait
  for dir in "$KT_DIR" "$VN_DIR"; do
    say "last lines of $dir.log"
    tail -n 40 "$dir.log"
  done
  part "pack k-tied" pack kt "$KT_DIR"
  part "pack variance-networks" pack vn "$VN_DIR"
  say "done; files in $OUT:"
  find "$OUT" -type f | sort
}

mkdir -p "$OUT"
main 2>&1 | tee "$OUT/log.txt"
