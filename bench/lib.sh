# bench/lib.sh: what the benchmark scripts share (sourced, never run): messages, the clusters'
# processes and CPU time, one timed run of a tool with its CPU and memory, and Spark's install
# and launch options. The caller sets CACHE, WORK, TXT, SRC, DST, PORT, CLK_TCK, VENV, VENV_PKGS,
# VENV_SPEC, SCC_URL, JARS_DIR and BENCH before sourcing it. A benchmark whose source is not a
# Cassandra node on SRC:PORT (bench/mysql-copy: MariaDB) also sets SRC_PORT, the source server's
# port on SRC, and SRC_LABEL, its name in the .txt (default cassandra-src).

say() { printf '\n== %s  %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }
note() { printf '%s\n' "$*" >>"$TXT"; }

answers() { (exec 3<>"/dev/tcp/$1/$PORT") 2>/dev/null; }
# Pid of the process listening on $1:${2:-$PORT} (a Cassandra JVM, or another source server),
# for its CPU time.
listener_pid() {
  local port=${2:-$PORT}
  ss -Hltnp "sport = :$port" | grep -F " $1:$port " | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2 || true
}
# CPU time (user+system, clock ticks) of the processes listening on each host of $1 (one host,
# or a cluster's nodes separated by spaces) on port ${2:-$PORT}.
cluster_ticks() {
  local host t=0
  for host in $1; do
    t=$((t + $(cpu_ticks "$(listener_pid "$host" "${2:-$PORT}")")))
  done
  echo "$t"
}
# CPU time (user+system, clock ticks) of a process.
cpu_ticks() {
  local stat
  [[ -n $1 ]] || { echo 0; return; }
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
  stat=${stat##*) }
  awk '{print $12 + $13}' <<<"$stat"
}

# Busy CPU time of the whole machine (clock ticks), to see what else ran during a copy.
busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }


# Installs (cached) the Python venv with pyspark (and cqlsh) when `tools_need_venv` says so,
# and the Spark Cassandra Connector's jars when `tools_need_spark` does.
install_python_and_spark() {
  local need_venv=$1 need_spark=$2
  if [[ $need_venv == yes ]]; then
    if [[ ! -f $VENV/.bench-ok || $(cat "$VENV/.bench-ok") != "$VENV_SPEC" ]]; then
      PY=${DROVER_BENCH_PYTHON:-$(command -v python3.11 || command -v python3)}
      "$PY" -c 'import sys; sys.exit(not (3, 8) <= sys.version_info[:2] <= (3, 11))' ||
        die "$PY: pyspark 3.5 and cqlsh need Python 3.8-3.11 (set DROVER_BENCH_PYTHON)"
      say "venv: pip install $VENV_SPEC ($("$PY" --version))"
      rm -rf "$VENV"
      "$PY" -m venv "$VENV"
      "$VENV/bin/pip" install --quiet --disable-pip-version-check "${VENV_PKGS[@]}" \
        >"$CACHE/venv.log" 2>&1 || { cat "$CACHE/venv.log" >&2; die "pip install failed"; }
      echo "$VENV_SPEC" >"$VENV/.bench-ok"
    fi
  fi
  if [[ $need_spark == yes && ! -f $JARS_DIR/.bench-ok ]]; then
    rm -rf "$JARS_DIR"
    mkdir -p "$JARS_DIR"
    say "Spark Cassandra Connector: $SCC"
    if curl -fsSL -o "$JARS_DIR/assembly.jar.part" "$SCC_URL"; then
      mv "$JARS_DIR/assembly.jar.part" "$JARS_DIR/${SCC_URL##*/}"
      echo "assembly $SCC" >"$JARS_DIR/.bench-ok"
    else
      # Maven Central serves the assembly for 3.0.0 and 3.2.0 only: take the plain connector and
      # its runtime dependencies (what the assembly bundles), minus Scala and slf4j (pyspark brings them).
      rm -f "$JARS_DIR/assembly.jar.part"
      command -v mvn >/dev/null || die "no $SCC on Maven Central and no mvn to resolve the plain connector"
      say "no assembly jar on Maven Central; mvn dependency:copy-dependencies of spark-cassandra-connector_2.12:3.5.1"
      mkdir -p "$JARS_DIR/pom"
      cp "$BENCH/cql-copy/scc-pom.xml" "$JARS_DIR/pom/pom.xml"
      mvn -q -B -f "$JARS_DIR/pom/pom.xml" dependency:copy-dependencies \
        -DoutputDirectory="$JARS_DIR" -DincludeScope=runtime -DexcludeGroupIds=org.scala-lang -DexcludeArtifactIds=slf4j-api \
        >"$JARS_DIR/mvn.log" 2>&1 || { cat "$JARS_DIR/mvn.log" >&2; die "mvn failed"; }
      rm -rf "$JARS_DIR/pom"
      echo "maven com.datastax.spark:spark-cassandra-connector_2.12:3.5.1 + runtime deps" >"$JARS_DIR/.bench-ok"
    fi
  fi
}

# run_timed NAME CMD...: runs CMD under /usr/bin/time -v (stdout NAME.out, stderr NAME.log in
# $WORK). Sets SECS (wall clock), RC, RSS_MB (peak RSS of the largest process), TOOL_CPU,
# SRC_CPU and DST_CPU (CPU seconds of the tool and of each side's Cassandra JVMs during the run:
# SRC and DST may each name several nodes; with SRC_PORT set, SRC_CPU is that of the process
# listening on SRC:SRC_PORT).
run_timed() {
  local name=$1
  shift
  local s0 d0 b0 t0 t1 load0
  s0=$(cluster_ticks "$SRC" "${SRC_PORT:-$PORT}") d0=$(cluster_ticks "$DST") b0=$(busy_ticks) load0=$(cut -d' ' -f1-3 /proc/loadavg)
  say "$name: $*"
  t0=$(date +%s.%N)
  set +e
  (cd "$WORK" && /usr/bin/time -v -o "$WORK/$name.time" "$@" >"$WORK/$name.out" 2>"$WORK/$name.log")
  RC=$?
  set -e
  t1=$(date +%s.%N)
  SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b - a}')
  SRC_CPU=$(awk -v a="$s0" -v b="$(cluster_ticks "$SRC" "${SRC_PORT:-$PORT}")" -v t="$CLK_TCK" 'BEGIN{printf "%.1f", (b - a) / t}')
  DST_CPU=$(awk -v a="$d0" -v b="$(cluster_ticks "$DST")" -v t="$CLK_TCK" 'BEGIN{printf "%.1f", (b - a) / t}')
  RSS_MB=$(awk -F': ' '/Maximum resident set size/{printf "%.0f", $2 / 1024}' "$WORK/$name.time")
  TOOL_CPU=$(awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{printf "%.1f", u + s}' "$WORK/$name.time")
  BUSY=$(awk -v a="$b0" -v b="$(busy_ticks)" -v t="$CLK_TCK" 'BEGIN{printf "%.1f", (b - a) / t}')
  OTHER_CPU=$(awk -v b="$BUSY" -v x="$TOOL_CPU" -v s="$SRC_CPU" -v d="$DST_CPU" 'BEGIN{o = b - x - s - d; printf "%.1f", o < 0 ? 0 : o}')
  {
    echo "$name: exit $RC, wall ${SECS}s; CPU seconds: tool $TOOL_CPU, ${SRC_LABEL:-cassandra-src} $SRC_CPU, cassandra-dst $DST_CPU, everything else $OTHER_CPU, machine busy $BUSY of $(awk -v s="$SECS" -v n="$(nproc)" 'BEGIN{printf "%.0f", s * n}') ($(nproc) cores x ${SECS}s); peak RSS ${RSS_MB} MB"
    echo "  load average before: $load0, after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "  command: $*"
    grep -E 'Elapsed|Maximum resident|Percent of CPU' "$WORK/$name.time" | sed 's/^\s*/  time: /' || true
    tr '\r' '\n' <"$WORK/$name.log" | grep -v '^\s*$' | tail -n 3 | cut -c1-300 | sed 's/^/  log: /' || true
    tr '\r' '\n' <"$WORK/$name.out" | grep -v '^\s*$' | tail -n 3 | cut -c1-300 | sed 's/^/  out: /' || true
  } >>"$TXT"
  if ((RC != 0)); then
    echo "bench: $name failed (exit $RC); last lines of $WORK/$name.log:" >&2
    tail -n 20 "$WORK/$name.log" >&2
  fi
}

# Sets JARS and OPENS: the connector's jars and the Java 17 options spark-submit needs.
spark_options() {
  JARS=$(find "$JARS_DIR" -maxdepth 1 -name '*.jar' | sort | paste -sd, -)
  # Java 17: the module openings Spark's own launcher adds, set explicitly.
  OPENS="-XX:+IgnoreUnrecognizedVMOptions"
  for p in java.lang java.lang.invoke java.lang.reflect java.io java.net java.nio java.util \
    java.util.concurrent java.util.concurrent.atomic sun.nio.ch sun.nio.cs sun.security.action \
    sun.util.calendar; do
    OPENS+=" --add-opens=java.base/$p=ALL-UNNAMED"
  done
  OPENS+=" -Djdk.reflect.useDirectMethodHandle=false -Dio.netty.tryReflectionSetAccessible=true"
  export SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$VENV/bin/python PYSPARK_DRIVER_PYTHON=$VENV/bin/python
}
