#!/usr/bin/env bash
# A real local Kubernetes control plane (a developer tool: make demo, the e2e tests, the webhook
# benchmark), with no container engine:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the standalone kwok controller
# run as background processes on 127.0.0.1 only; kwok plays the kubelet for the fake nodes in
# nodes.yaml (4 H200 GPU nodes in two racks, 1 CPU-only node).
#
# Usage: dev/cluster/cluster.sh up|down|status|env|smoke|crd|stop-component|start-component|pause-component|resume-component
#   up      build the binaries if missing (build-binaries.sh), start everything, wait until the
#           apiserver is ready, the controller-manager works (default ServiceAccount exists) and
#           all fake nodes are Ready and untainted; print the kubeconfig path on stdout.
#           Idempotent: a healthy cluster is left alone. A stale one (processes died) is repaired:
#           if etcd or kube-apiserver is gone everything restarts on fresh etcd data, otherwise only
#           the missing components are restarted.
#   down    stop every component (SIGTERM to its process group, SIGKILL after a grace period) and
#           delete the etcd data, the audit log and the pid files. The PKI, kubeconfigs and
#           component logs are KEPT (the next `up` reuses the PKI; logs are for post-mortems).
#           `down --purge` (or PDD_CLUSTER_PURGE=1) removes the whole state directory instead.
#   status  one line per component; exit 0 when everything is up and healthy, 3 otherwise.
#   env     print shell exports: eval "$(dev/cluster/cluster.sh env)"
#   smoke   a quick placement check: a pod asking for 2 GPUs becomes Ready on a GPU node, one
#           asking for 16 stays Pending with FailedScheduling "Insufficient nvidia.com/gpu".
#   crd [FILE]  server-side apply the CustomResourceDefinitions of FILE (default: crds/pddeployment.yaml)
#           and wait until each is Established (`kubectl wait --for=condition=Established` alone fails at
#           once while a new CRD's status.conditions is still null).
#   stop-component|start-component NAME    take one component away / bring it back (etcd data kept)
#   pause-component|resume-component NAME  SIGSTOP / SIGCONT it: connections stay open, nothing answers
#
# Environment:
#   PDD_CACHE            cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/pdd-operator)
#   PDD_CLUSTER_DIR      state directory (default $PDD_CACHE/cluster)
#   K8S_VERSION          binaries to use (default v1.37.2; see build-binaries.sh)
#   PDD_APISERVER_PORT   kube-apiserver port (default 16443); the others derive from it:
#   PDD_ETCD_PORT        etcd client port        (default apiserver+1, 16444)
#   PDD_ETCD_PEER_PORT   etcd peer port          (default apiserver+2, 16445)
#   PDD_KCM_PORT         controller-manager port (default apiserver+3, 16446)
#   PDD_SCHEDULER_PORT   scheduler port          (default apiserver+4, 16447)
#   PDD_KWOK_PORT        kwok health/metrics     (default apiserver+5, 16448)
#   PDD_CLUSTER_TIMEOUT  seconds `up` waits for each readiness step (default 180)
#   PDD_APISERVER_ADMISSION_PLUGINS  admission plugins to enable beyond the apiserver's defaults, comma
#                        separated (kube-apiserver --enable-admission-plugins), e.g.
#                        OwnerReferencesPermissionEnforcement as OpenShift has it. `up` restarts a
#                        running apiserver (etcd data kept) whose plugins differ; unset: the defaults.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
PDD_CACHE="${PDD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pdd-operator}"
BIN="$PDD_CACHE/bin/k8s-$K8S_VERSION"
STATE="${PDD_CLUSTER_DIR:-$PDD_CACHE/cluster}"
PKI="$STATE/pki"
LOGS="$STATE/logs"
PIDS="$STATE/pids"
ETCD_DATA="$STATE/etcd-data"
AUDIT_LOG="$STATE/audit/audit.log"
KUBECONFIG_PATH="$STATE/kubeconfig"

APISERVER_PORT="${PDD_APISERVER_PORT:-16443}"
ETCD_PORT="${PDD_ETCD_PORT:-$((APISERVER_PORT + 1))}"
ETCD_PEER_PORT="${PDD_ETCD_PEER_PORT:-$((APISERVER_PORT + 2))}"
KCM_PORT="${PDD_KCM_PORT:-$((APISERVER_PORT + 3))}"
SCHEDULER_PORT="${PDD_SCHEDULER_PORT:-$((APISERVER_PORT + 4))}"
KWOK_PORT="${PDD_KWOK_PORT:-$((APISERVER_PORT + 5))}"
TIMEOUT="${PDD_CLUSTER_TIMEOUT:-180}"
ADMISSION_PLUGINS="${PDD_APISERVER_ADMISSION_PLUGINS:-}"

SERVICE_CIDR="10.96.0.0/16"
SERVICE_IP="10.96.0.1"
# Fake pod IPs that kwok hands out. Nothing ever dials them (traffic to private ranges is
# forbidden on the test machines); they only need to look like pod IPs.
POD_CIDR="10.244.0.1/16"

COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
SERVER="https://127.0.0.1:$APISERVER_PORT"

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------------------------------------
# processes

pid_of() { [[ -s "$PIDS/$1.pid" ]] && cat "$PIDS/$1.pid" || true; }

# alive NAME: the pid file names a live process that runs our binary (guards against pid reuse).
alive() {
  local pid; pid="$(pid_of "$1")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
  local argv0; argv0="$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n1)"
  [[ "$argv0" == "$BIN/$1" ]]
}

# start NAME ARGS...: run $BIN/NAME in its own session (so its process group is its pid and it
# outlives the caller's process group), output appended to $LOGS/NAME.log.
start() {
  local name="$1"; shift
  printf '\n===== %s start %s\n' "$(date -u +%FT%TZ)" "$name" >>"$LOGS/$name.log"
  # 9>&-: the daemon must not inherit the lock (fd 9) held by `up`, or the lock stays taken
  # for as long as the cluster runs.
  setsid "$BIN/$name" "$@" </dev/null >>"$LOGS/$name.log" 2>&1 9>&- &
  local pid=$!
  echo "$pid" >"$PIDS/$name.pid"
  # Until bash's fork has exec'd setsid and setsid has exec'd the binary, /proc/PID/cmdline is not
  # the component's: wait (bounded) so that `alive` never mistakes a starting process for a dead one.
  local i
  for ((i = 0; i < 100; i++)); do
    [[ "$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n1)" == "$BIN/$name" ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
}

# stop NAME...: SIGTERM each process group, wait up to $STOP_GRACE seconds (default 15), then
# SIGKILL what is left.
stop() {
  local name pid pids=() grace="${STOP_GRACE:-15}"
  for name in "$@"; do
    alive "$name" || { rm -f "$PIDS/$name.pid"; continue; }
    pid="$(pid_of "$name")"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    pids+=("$pid")
  done
  local deadline=$((SECONDS + grace))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "pid $pid ignored SIGTERM; sending SIGKILL"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
  done
  for name in "$@"; do rm -f "$PIDS/$name.pid"; done
}

# running_admission_plugins: the --enable-admission-plugins value of the running apiserver ("": none).
running_admission_plugins() {
  local pid; pid="$(pid_of kube-apiserver)"
  [[ -n "$pid" ]] || return 0
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | awk 'p {print; exit} $0 == "--enable-admission-plugins" {p = 1}'
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---------------------------------------------------------------------------------------------
# health probes

curl_admin() { curl -sS --max-time 3 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }

healthy() {
  case "$1" in
    etcd) curl -sS --max-time 3 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"' ;;
    kube-apiserver) [[ "$(curl_admin "$SERVER/readyz" 2>/dev/null)" == ok ]] ;;
    # Their serving certs are self-signed and in memory; /healthz is always allowed.
    kube-controller-manager) [[ "$(curl -sSk --max-time 3 "https://127.0.0.1:$KCM_PORT/healthz" 2>/dev/null)" == ok ]] ;;
    kube-scheduler) [[ "$(curl -sSk --max-time 3 "https://127.0.0.1:$SCHEDULER_PORT/healthz" 2>/dev/null)" == ok ]] ;;
    kwok) [[ "$(curl -sS --max-time 3 "http://127.0.0.1:$KWOK_PORT/healthz" 2>/dev/null)" == ok ]] ;;
  esac
}

# wait_until DESCRIPTION COMPONENT COMMAND...: poll COMMAND (every 0.25s) until it succeeds;
# fail early if COMPONENT's process died, and after $TIMEOUT seconds.
wait_until() {
  log "waiting for: $1"
  local what="$1" comp="$2"; shift 2
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    if [[ -n "$comp" ]] && ! alive "$comp"; then
      log "$comp exited while waiting for: $what; last lines of $LOGS/$comp.log:"
      tail -n 30 "$LOGS/$comp.log" >&2 || true
      exit 1
    fi
    if ((SECONDS >= deadline)); then
      log "timed out after ${TIMEOUT}s waiting for: $what"
      [[ -n "$comp" ]] && { tail -n 30 "$LOGS/$comp.log" >&2 || true; }
      exit 1
    fi
    sleep 0.25
  done
}

kubectl_() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

default_sa_exists() { kubectl_ get serviceaccount default -n default -o name; }

nodes_ready() {
  # Every node of nodes.yaml is Ready and has none of the node lifecycle controller's
  # node.kubernetes.io/* taints (not-ready, unreachable), so pods can be scheduled right away.
  # Other nodes and other taints (a test's own) are ignored.
  local want got
  want="$(awk '/^  name: / {print $2}' "$HERE/nodes.yaml" | sort)"
  got="$(kubectl_ get nodes -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{" "}{.spec.taints[*].key}{"\n"}{end}' |
    awk '$2 == "True" && $0 !~ /node\.kubernetes\.io\// {print $1}' | sort)"
  [[ -n "$want" ]] && [[ -z "$(comm -23 <(echo "$want") <(echo "$got"))" ]]
}

# ---------------------------------------------------------------------------------------------
# PKI and configuration files (created once; kept across down/up)

sign() { # NAME SUBJECT EXTENSIONS: key + CSR, signed by the CA
  local name="$1" subj="$2" ext="$3"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
    -days 3650 -sha256 -extfile <(printf '%s\n' "$ext") -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr"
}

make_pki() {
  [[ -s "$PKI/done" ]] && return
  log "creating PKI in $PKI"
  rm -rf "$PKI"; mkdir -p "$PKI"; chmod 700 "$PKI"
  openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 3650 -sha256 \
    -subj "/CN=pdd-operator-test-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  local client="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  sign apiserver "/CN=kube-apiserver" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,IP:$SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  # admin (system:masters): kubectl, the tests and the operator under test.
  sign admin "/O=system:masters/CN=pdd-admin" "$client"
  # Built-in RBAC identities for the two control-plane controllers.
  sign kube-controller-manager "/CN=system:kube-controller-manager" "$client"
  sign kube-scheduler "/CN=system:kube-scheduler" "$client"
  # kwok gets its own user so its writes are easy to tell apart in the audit log.
  sign kwok "/O=system:masters/CN=kwok-controller" "$client"
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  chmod 600 "$PKI"/*.key
  date -u +%FT%TZ >"$PKI/done"
}

write_kubeconfig() { # FILE CERT-NAME
  local file="$1" name="$2"
  umask 077
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: pdd-local
  cluster:
    server: $SERVER
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 <"$PKI/$name.crt")
    client-key-data: $(base64 -w0 <"$PKI/$name.key")
contexts:
- name: pdd-local
  context:
    cluster: pdd-local
    user: $name
current-context: pdd-local
EOF
  umask 022
}

write_configs() {
  mkdir -p "$STATE/config" "$(dirname "$AUDIT_LOG")"
  # Ports can change between runs (PDD_APISERVER_PORT): always rewrite kubeconfigs.
  write_kubeconfig "$KUBECONFIG_PATH" admin
  local c
  for c in kube-controller-manager kube-scheduler kwok; do write_kubeconfig "$STATE/config/$c.kubeconfig" "$c"; done

  # Audit: every write (create/update/patch/delete/deletecollection) on every resource, at
  # Metadata level, so tests can count the operator's writes (filter on user.username /
  # userAgent / objectRef). Reads are not logged. The only writes dropped are the per-node and
  # per-apiserver lease renewals (every 10s, pure noise).
  cat >"$STATE/config/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["kwok-controller", "system:apiserver"]
  verbs: ["update", "patch"]
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
# Every request, reads included, of the ServiceAccounts in namespaces pdd-chart-e2e and
# pdd-chart-e2e-ns: the operators that tests/e2e/test_chart*.py run as the Helm chart's ServiceAccount,
# to show no 403 and no verb outside their role.
- level: Metadata
  userGroups: ["system:serviceaccounts:pdd-chart-e2e", "system:serviceaccounts:pdd-chart-e2e-ns"]
- level: None
EOF

  kwok_config >"$STATE/config/kwok.yaml"
}

kwok_config() {
  # kwok: only the stage definitions (without them kwok exits "no stages found"). Its options are
  # all flags (see start_component): a KwokConfiguration document in this file would NOT get
  # kwok's defaults applied (v0.8.0 then fails: "node leases parallelism must be greater than 0").
  local stages="$BIN/kwok-stages" f
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    [[ -s "$stages/$f" ]] || die "kwok stage $stages/$f is missing (rerun build-binaries.sh)"
    cat "$stages/$f"
    printf -- '---\n'
  done
  # Ours: what kwok's stages leave out (see the file).
  cat "$HERE/kwok-stages/pod-ready-again.yaml"
}

# The running kwok was started with the stages this checkout defines (a checkout that adds a stage
# restarts kwok on the next `up`, instead of leaving the old stages running).
kwok_config_current() { cmp -s <(kwok_config) "$STATE/config/kwok.yaml"; }

# ---------------------------------------------------------------------------------------------
# components

start_component() {
  local name="$1"
  case "$name" in
    etcd)
      start etcd --name pdd --data-dir "$ETCD_DATA" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster "pdd=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new \
        --unsafe-no-fsync --quota-backend-bytes $((4 * 1024 * 1024 * 1024)) --log-level warn
      ;;
    kube-apiserver)
      # --advertise-address 127.0.0.1 keeps the host's own (private) address out of the cluster
      # (unset, the apiserver picks the host's interface address); --endpoint-reconciler-type none:
      # nothing publishes an address in the `kubernetes` Service's endpoints.
      # --kubelet-preferred-address-types InternalIP: fake nodes' InternalIP is 127.0.0.1 (kwok
      # --node-ip), so `kubectl logs/exec` can never make the apiserver dial a private address.
      local admission=()
      [[ -n "$ADMISSION_PLUGINS" ]] && admission=(--enable-admission-plugins "$ADMISSION_PLUGINS")
      start kube-apiserver "${admission[@]}" \
        --bind-address 127.0.0.1 --secure-port "$APISERVER_PORT" --advertise-address 127.0.0.1 \
        --endpoint-reconciler-type none \
        --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
        --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
        --client-ca-file "$PKI/ca.crt" \
        --authorization-mode Node,RBAC \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
        --service-cluster-ip-range "$SERVICE_CIDR" \
        --allow-privileged=true \
        --kubelet-preferred-address-types InternalIP \
        --audit-policy-file "$STATE/config/audit-policy.yaml" --audit-log-path "$AUDIT_LOG" \
        --audit-log-format json --audit-log-mode blocking --audit-log-maxsize 0 \
        --profiling=false
      ;;
    kube-controller-manager)
      # No --authentication/--authorization-kubeconfig (here and for the scheduler): their secure
      # port then serves only the always-allowed /healthz, /readyz, /livez, which is all we use,
      # and they stop logging "missing content for CA bundle ...requestheader-client-ca-file"
      # (there is no front-proxy CA) every few seconds.
      local kc="$STATE/config/kube-controller-manager.kubeconfig"
      start kube-controller-manager \
        --kubeconfig "$kc" \
        --bind-address 127.0.0.1 --secure-port "$KCM_PORT" \
        --controllers '*' --use-service-account-credentials=true \
        --root-ca-file "$PKI/ca.crt" --service-account-private-key-file "$PKI/sa.key" \
        --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
        --leader-elect=false --profiling=false
      ;;
    kube-scheduler)
      local ks="$STATE/config/kube-scheduler.kubeconfig"
      start kube-scheduler \
        --kubeconfig "$ks" \
        --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" \
        --leader-elect=false --profiling=false
      ;;
    kwok)
      # --server-address: health/metrics (and, with --node-port, the fake kubelet API) on loopback
      # only; left empty with --node-port set, kwok would listen on 0.0.0.0.
      # --node-lease-duration-seconds: kwok renews each node's Lease like a kubelet (0, the default,
      # runs no lease controller), so the node lifecycle controller keeps the nodes Ready.
      start kwok --kubeconfig "$STATE/config/kwok.kubeconfig" --config "$STATE/config/kwok.yaml" \
        --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
        --server-address "127.0.0.1:$KWOK_PORT" --node-ip 127.0.0.1 --node-name localhost \
        --node-port "$KWOK_PORT" --node-lease-duration-seconds 40 --cidr "$POD_CIDR"
      ;;
  esac
}

port_of() {
  case "$1" in
    etcd) echo "$ETCD_PORT $ETCD_PEER_PORT" ;;
    kube-apiserver) echo "$APISERVER_PORT" ;;
    kube-controller-manager) echo "$KCM_PORT" ;;
    kube-scheduler) echo "$SCHEDULER_PORT" ;;
    kwok) echo "$KWOK_PORT" ;;
  esac
}

launch() { # start the named components together (ports must be free), then wait until each is healthy
  local name port
  for name in "$@"; do
    for port in $(port_of "$name"); do
      port_in_use "$port" && die "127.0.0.1:$port (for $name) is taken by another process; stop it or set PDD_APISERVER_PORT"
    done
    log "starting $name (log: $LOGS/$name.log)"
    start_component "$name"
  done
  for name in "$@"; do wait_until "$name healthy" "$name" healthy "$name"; done
}

all_healthy() {
  local c
  for c in "${COMPONENTS[@]}"; do alive "$c" && healthy "$c" || return 1; done
}

cmd_up() {
  local t0=$SECONDS
  "$HERE/build-binaries.sh" >/dev/null
  mkdir -p "$LOGS" "$PIDS"
  if all_healthy && nodes_ready 2>/dev/null && [[ "$(running_admission_plugins)" == "$ADMISSION_PLUGINS" ]] &&
    kwok_config_current; then
    log "already up"
    echo "$KUBECONFIG_PATH"
    return
  fi
  make_pki
  local kwok_changed=0
  kwok_config_current || kwok_changed=1
  write_configs
  local missing=() c
  if alive etcd && alive kube-apiserver && healthy etcd && healthy kube-apiserver; then
    if ((kwok_changed)) && alive kwok; then
      log "restarting kwok: its stages changed"
      stop kwok
    fi
    local running; running="$(running_admission_plugins)"
    if [[ "$running" != "$ADMISSION_PLUGINS" ]]; then
      log "restarting kube-apiserver: admission plugins '${running:-defaults}' -> '${ADMISSION_PLUGINS:-defaults}'"
      stop kube-apiserver
      launch kube-apiserver
    fi
    for c in kube-controller-manager kube-scheduler kwok; do
      alive "$c" || missing+=("$c")
    done
    log "control plane is up; (re)starting: ${missing[*]:-nothing}"
  else
    # etcd or the apiserver is gone: start over from fresh etcd data. Leftovers are killed after a
    # short grace (an apiserver whose etcd died does not finish a graceful shutdown).
    log "starting a fresh cluster in $STATE (apiserver $SERVER)"
    STOP_GRACE=3 stop kwok kube-scheduler kube-controller-manager kube-apiserver etcd
    rm -rf "$ETCD_DATA" "$AUDIT_LOG"
    for c in "${COMPONENTS[@]}"; do [[ -f "$LOGS/$c.log" ]] && mv -f "$LOGS/$c.log" "$LOGS/$c.log.prev"; done
    launch etcd
    launch kube-apiserver
    missing=(kube-controller-manager kube-scheduler kwok)
  fi
  # Nodes first: kwok (starting next) initializes them while the controller-manager warms up.
  kubectl_ apply -f "$HERE/nodes.yaml" >/dev/null
  [[ ${#missing[@]} -gt 0 ]] && launch "${missing[@]}"
  wait_until "default ServiceAccount in namespace default (controller-manager working)" kube-controller-manager default_sa_exists
  wait_until "all fake nodes Ready and untainted" kwok nodes_ready
  log "up in $((SECONDS - t0))s; KUBECONFIG=$KUBECONFIG_PATH"
  echo "$KUBECONFIG_PATH"
}

cmd_down() {
  local purge="${PDD_CLUSTER_PURGE:-0}"
  [[ "${1:-}" == "--purge" ]] && purge=1
  [[ -d "$STATE" ]] || { log "nothing to stop ($STATE does not exist)"; return; }
  mkdir -p "$PIDS"
  # etcd last: an apiserver that lost etcd hangs in its graceful shutdown.
  stop kwok kube-scheduler kube-controller-manager kube-apiserver
  stop etcd
  if [[ "$purge" == 1 ]]; then
    rm -rf "$STATE"
    log "down; removed $STATE"
  else
    rm -rf "$ETCD_DATA" "$AUDIT_LOG" "$PIDS"
    log "down; etcd data and audit log removed, PKI/kubeconfigs/logs kept in $STATE"
  fi
}

cmd_status() {
  local c ok=0 pid state
  for c in "${COMPONENTS[@]}"; do
    pid="$(pid_of "$c")"
    if alive "$c"; then
      if healthy "$c"; then state="up"; else state="running, NOT healthy"; ok=1; fi
      printf '%-24s %-20s pid %-8s port %s\n' "$c" "$state" "$pid" "$(port_of "$c")"
    else
      printf '%-24s %-20s\n' "$c" "down"; ok=1
    fi
  done
  if healthy kube-apiserver 2>/dev/null; then
    printf '%-24s %s\n' "nodes" "$(kubectl_ get nodes --no-headers 2>/dev/null | awk '{n++; if ($2 == "Ready") r++} END {printf "%d/%d Ready", r, n}')"
  fi
  printf '%-24s %s\n' "kubeconfig" "$KUBECONFIG_PATH"
  printf '%-24s %s\n' "audit log" "$AUDIT_LOG"
  return $((ok ? 3 : 0))
}

cmd_env() {
  printf 'export KUBECONFIG=%q\n' "$KUBECONFIG_PATH"
  # shellcheck disable=SC2016 # $PATH is expanded by the caller's eval, not here
  printf 'export PATH=%q:"$PATH"\n' "$BIN"
  printf 'export PDD_CLUSTER_DIR=%q\n' "$STATE"
  printf 'export PDD_AUDIT_LOG=%q\n' "$AUDIT_LOG"
}

cmd_smoke() {
  all_healthy || die "cluster is not up (run: $0 up)"
  local ns="pdd-smoke-$$" node pending_msg
  kubectl_ create namespace "$ns" >/dev/null
  trap 'kubectl_ delete namespace "'"$ns"'" --wait=false >/dev/null 2>&1 || true' EXIT
  kubectl_ apply -n "$ns" -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: gpu-2}
spec:
  containers:
  - name: main
    image: example.invalid/cuda:latest
    resources:
      limits: {nvidia.com/gpu: "2", rdma/ib: "1"}
---
apiVersion: v1
kind: Pod
metadata: {name: gpu-16}
spec:
  containers:
  - name: main
    image: example.invalid/cuda:latest
    resources:
      limits: {nvidia.com/gpu: "16"}
EOF
  kubectl_ wait -n "$ns" --for=condition=Ready pod/gpu-2 --timeout=60s >/dev/null
  node="$(kubectl_ get -n "$ns" pod gpu-2 -o jsonpath='{.spec.nodeName}')"
  [[ "$(kubectl_ get node "$node" -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.product}')" == NVIDIA-H200 ]] ||
    die "gpu-2 landed on $node, which is not a GPU node"
  log "ok: gpu-2 is Ready on $node"
  wait_until "FailedScheduling event for gpu-16" "" \
    bash -c "'$BIN/kubectl' --kubeconfig '$KUBECONFIG_PATH' get events -n '$ns' --field-selector involvedObject.name=gpu-16,reason=FailedScheduling -o name | grep -q ."
  pending_msg="$(kubectl_ get events -n "$ns" --field-selector involvedObject.name=gpu-16,reason=FailedScheduling -o jsonpath='{.items[0].message}')"
  [[ "$(kubectl_ get -n "$ns" pod gpu-16 -o jsonpath='{.status.phase}')" == Pending ]] || die "gpu-16 is not Pending"
  [[ "$pending_msg" == *"Insufficient nvidia.com/gpu"* ]] || die "unexpected FailedScheduling message: $pending_msg"
  log "ok: gpu-16 stays Pending: $pending_msg"
}

# up and down hold a lock (next to the state dir, so `down --purge` can remove the dir), so that
# stop-component NAME / start-component NAME: take one component away and bring it back on the same
# state (etcd data kept), to test how clients live through an outage. start-component waits until it
# is healthy; it is a no-op for a component that is already up.
established() { # KIND/NAME of a CustomResourceDefinition: its Established condition is True
  [[ "$(kubectl_ get "$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')" == True ]]
}

cmd_crd() {
  local file="${1:-$HERE/../../crds/pddeployment.yaml}" names name
  [[ -s "$file" ]] || die "no CRD file $file"
  names="$(kubectl_ apply --server-side --force-conflicts -f "$file" -o name)" || die "cannot apply $file"
  for name in $names; do
    wait_until "$name Established" kube-apiserver established "$name"
  done
}

known_component() {
  local c
  for c in "${COMPONENTS[@]}"; do [[ "$c" == "${1:-}" ]] && return 0; done
  die "unknown component '${1:-}' (one of: ${COMPONENTS[*]})"
}

cmd_stop_component() {
  known_component "$1"
  mkdir -p "$PIDS"
  STOP_GRACE="${STOP_GRACE:-5}" stop "$1"
  log "$1 stopped"
}

cmd_start_component() {
  known_component "$1"
  mkdir -p "$LOGS" "$PIDS"
  if alive "$1" && healthy "$1"; then
    log "$1 already up"
    return
  fi
  make_pki
  write_configs
  launch "$1"
}

# pause-component NAME / resume-component NAME: SIGSTOP / SIGCONT the component's process. Unlike a
# stopped one, a paused component keeps its listening socket and its open connections: clients connect
# (the kernel completes the handshake) and their requests and watches hang without an answer or an
# error, as with a hung apiserver or etcd, until it is resumed.
cmd_signal_component() {
  known_component "$1"
  alive "$1" || die "$1 is not running"
  kill "-$2" "$(pid_of "$1")"
  log "$1 sent SIG$2"
}

# parallel callers (e.g. several test workers running `up`) wait for each other instead of racing.
lock() {
  mkdir -p "$(dirname "$STATE")"
  exec 9>"${STATE%/}.flock"
  flock -w "$((TIMEOUT * 3))" 9 || die "could not lock ${STATE%/}.flock"
}

case "${1:-}" in
  up) lock; cmd_up ;;
  down) shift; lock; cmd_down "$@" ;;
  status) cmd_status ;;
  env) cmd_env ;;
  smoke) cmd_smoke ;;
  crd) shift; cmd_crd "${1:-}" ;;
  stop-component) shift; lock; cmd_stop_component "${1:-}" ;;
  start-component) shift; lock; cmd_start_component "${1:-}" ;;
  pause-component) shift; cmd_signal_component "${1:-}" STOP ;;
  resume-component) shift; cmd_signal_component "${1:-}" CONT ;;
  *) echo "usage: $0 up|down [--purge]|status|env|smoke|crd [FILE]|stop-component NAME|start-component NAME|pause-component NAME|resume-component NAME" >&2; exit 2 ;;
esac
