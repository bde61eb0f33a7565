#!/usr/bin/env bash
# Simulated hosts for tests and benchmarks: one network namespace per "VM",
# each joined to one Linux bridge by a veth pair, with an /etc/hosts of its
# own (ip netns exec bind-mounts /etc/netns/<ns>/*) that names every VM of
# the net and maps metadata.google.internal to 169.254.169.254 on the VM's own
# loopback, where a test runs that VM's metadata server.
#
#   vmnet.sh check                       exit 0 if namespaces can be made here
#   vmnet.sh create NET ID HOST...       bridge NET-br, 10.213.ID.1/24 on it,
#                                        HOST k at 10.213.ID.(10+k)
#   vmnet.sh exec NET HOST CMD...        runs CMD on HOST
#   vmnet.sh kill NET HOST               powers HOST off: SIGKILL to all its
#                                        processes, its namespace deleted
#   vmnet.sh boot NET HOST               makes HOST again (same name and address)
#   vmnet.sh shape NET RATE DELAY        every link, both ways, limited to RATE
#                                        with DELAY added (tc netem, e.g. 1gbit
#                                        0.5ms); where the kernel has no netem,
#                                        RATE only (tc tbf), said on stderr
#   vmnet.sh destroy NET                 kills and deletes everything of NET
#
# NET is a short name (at most 6 characters: interface names are at most 15).
# Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2.
set -euo pipefail

die() { echo "vmnet: $*" >&2; exit 1; }
state_dir() { echo "/run/pstrain-vmnet/$1"; }
ns_name() { echo "$1-$2"; }

# The index and address of HOST in NET.
host_index() {
  local i=0 h
  while read -r h; do
    [[ "$h" == "$2" ]] && { echo "$i"; return 0; }
    i=$((i + 1))
  done <"$(state_dir "$1")/hosts"
  die "no host $2 in net $1"
}

# shape_link NS VETH RATE DELAY: both directions of one link.
shape_link() {
  local ns="$1" veth="$2" rate="$3" delay="$4"
  if tc qdisc replace dev "$veth" root netem rate "$rate" delay "$delay" 2>/dev/null; then
    ip netns exec "$ns" tc qdisc replace dev eth0 root netem rate "$rate" delay "$delay"
  else
    # A token bucket of 1 ms at RATE.
    local burst
    burst="$(rate_bytes_per_ms "$rate")"
    tc qdisc replace dev "$veth" root tbf rate "$rate" burst "$burst" latency 50ms
    ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 50ms
  fi
}

# Bytes per millisecond at a tc rate such as 1gbit, 100mbit or 10gbit.
rate_bytes_per_ms() {
  local n="${1%%[a-z]*}" unit="${1##*[0-9]}"
  case "$unit" in
    gbit) echo $((n * 1000000000 / 8000)) ;;
    mbit) echo $((n * 1000000 / 8000)) ;;
    kbit) echo $((n * 1000 / 8000 > 1600 ? n * 1000 / 8000 : 1600)) ;;
    *) die "rate '$1': use kbit, mbit or gbit" ;;
  esac
}

# Deletes the link `$1` if it is there and waits (up to 5 s) until it is
# gone: a deleted namespace's veth pair goes with it only when the kernel
# gets round to tearing the namespace down, and a VM recreated at once would
# find its link's name still taken ("RTNETLINK answers: File exists").
remove_link() {
  ip link del "$1" 2>/dev/null || true
  for _ in $(seq 1 50); do
    ip link show "$1" >/dev/null 2>&1 || return 0
    sleep 0.1
  done
  die "the link $1 is still there 5 s after it was deleted"
}

host_link() { echo "${1}v$(host_index "$1" "$2")"; }

make_host() {
  local net="$1" host="$2" id index ns veth
  id="$(cat "$(state_dir "$net")/id")"
  index="$(host_index "$net" "$host")"
  ns="$(ns_name "$net" "$host")"
  veth="$(host_link "$net" "$host")"
  remove_link "$veth"
  ip netns add "$ns"
  # The same MAC for every boot of a host: the other VMs' ARP caches stay
  # right when a VM is recreated (on GCE the VPC routes by address).
  ip link add "$veth" type veth peer name eth0 netns "$ns" \
    address "$(printf '02:00:0a:d5:%02x:%02x' "$id" $((10 + index)))"
  ip link set "$veth" master "$net-br" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add 169.254.169.254/32 dev lo
  ip -n "$ns" addr add "10.213.$id.$((10 + index))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route add default via "10.213.$id.1"
  if [[ -f "$(state_dir "$net")/shape" ]]; then
    shape_link "$ns" "$veth" $(cat "$(state_dir "$net")/shape")
  fi
}

kill_host() {
  local ns
  ns="$(ns_name "$1" "$2")"
  [[ -e "/run/netns/$ns" ]] || return 0
  local pids
  pids="$(ip netns pids "$ns" || true)"
  if [[ -n "$pids" ]]; then
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
    for _ in $(seq 1 50); do
      [[ -z "$(ip netns pids "$ns" 2>/dev/null)" ]] && break
      sleep 0.1
    done
  fi
  ip netns delete "$ns"
  remove_link "$(host_link "$1" "$2")"
}

cmd="${1:-}"
shift || true
case "$cmd" in
  check)
    [[ $EUID -eq 0 ]] || die "not root: network namespaces need CAP_NET_ADMIN"
    command -v ip >/dev/null || die "ip (iproute2) is not installed"
    probe="pstp$$"
    ip netns add "$probe" 2>/dev/null || die "ip netns add fails here: $(ip netns add "$probe" 2>&1)"
    ok=1
    ip link add "$probe-b" type bridge 2>/dev/null || ok=0
    ip link del "$probe-b" 2>/dev/null || true
    ip netns delete "$probe"
    [[ $ok == 1 ]] || die "cannot create a bridge here"
    ;;
  create)
    [[ $# -ge 3 ]] || die "usage: vmnet.sh create NET ID HOST..."
    net="$1" id="$2"
    shift 2
    [[ ${#net} -le 6 ]] || die "net name '$net' is longer than 6 characters"
    [[ "$id" =~ ^[0-9]+$ && "$id" -ge 1 && "$id" -le 254 ]] || die "id '$id' is not 1..254"
    dir="$(state_dir "$net")"
    [[ ! -e "$dir" ]] || die "net $net exists; destroy it first"
    mkdir -p "$dir"
    echo "$id" >"$dir/id"
    printf '%s\n' "$@" >"$dir/hosts"
    # A fixed address: a bridge otherwise takes the lowest of its ports', and
    # a VM deleted or added would change it under the other VMs' ARP caches
    # (their traffic to the bridge's address lost for half a minute).
    ip link add "$net-br" address "$(printf '02:00:0a:d5:%02x:01' "$id")" type bridge
    ip addr add "10.213.$id.1/24" dev "$net-br"
    ip link set "$net-br" up
    i=0
    for host in "$@"; do
      mkdir -p "/etc/netns/$(ns_name "$net" "$host")"
      {
        echo "127.0.0.1 localhost"
        echo "169.254.169.254 metadata.google.internal metadata"
        j=0
        for other in "$@"; do
          echo "10.213.$id.$((10 + j)) $other"
          j=$((j + 1))
        done
      } >"/etc/netns/$(ns_name "$net" "$host")/hosts"
      # On Compute Engine the VPC's resolver answers instance names; here the
      # hosts file does, and DNS queries (gRPC's resolver asks for more than
      # addresses) are refused at once instead of timing out.
      echo "nameserver 127.0.0.1" >"/etc/netns/$(ns_name "$net" "$host")/resolv.conf"
      make_host "$net" "$host"
      i=$((i + 1))
    done
    ;;
  exec)
    [[ $# -ge 3 ]] || die "usage: vmnet.sh exec NET HOST CMD..."
    ns="$(ns_name "$1" "$2")"
    shift 2
    exec ip netns exec "$ns" "$@"
    ;;
  kill) kill_host "$1" "$2" ;;
  boot) make_host "$1" "$2" ;;
  shape)
    [[ $# -eq 3 ]] || die "usage: vmnet.sh shape NET RATE DELAY"
    net="$1"
    echo "$2 $3" >"$(state_dir "$net")/shape"
    if ! tc qdisc add dev "$net-br" root netem delay 0ms 2>/dev/null; then
      echo "vmnet: this kernel ($(uname -r)) has no tc netem: links are limited to $2 (tc tbf)" \
        "without the $3 delay" >&2
    else
      tc qdisc del dev "$net-br" root
    fi
    while read -r host; do
      index="$(host_index "$net" "$host")"
      shape_link "$(ns_name "$net" "$host")" "${net}v${index}" "$2" "$3"
    done <"$(state_dir "$net")/hosts"
    ;;
  destroy)
    net="$1"
    dir="$(state_dir "$net")"
    if [[ -f "$dir/hosts" ]]; then
      while read -r host; do
        kill_host "$net" "$host"
        rm -rf "/etc/netns/$(ns_name "$net" "$host")"
      done <"$dir/hosts"
    fi
    ip link del "$net-br" 2>/dev/null || true
    rm -rf "$dir"
    ;;
  *) die "usage: vmnet.sh check|create|exec|kill|boot|shape|destroy ..." ;;
esac
