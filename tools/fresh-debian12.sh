#!/usr/bin/env bash
# tools/fresh-debian12.sh: the README's first two commands on a fresh Debian 12, for real.
#
# Makes a minimal Debian 12 (bookworm) in a folder with debootstrap, adds only what a bare machine
# has (g++, cmake, make, git, python3, CA certificates; no Node.js, so `make setup` must bring
# Node 20 itself), clones this checkout's HEAD into it, and runs `make demo`, then `make test`,
# there under chroot. CI (.ci/run) runs `make test` on a machine that already has Node 20; this
# checks the barer case, from nothing.
#
#   sudo tools/fresh-debian12.sh [--user NAME] [DIR [TARGET...]]
#     DIR: an empty or absent folder (default ../fresh-debian12).
#     TARGET...: the make targets to run, in order (default: demo test; `bench` checks that
#     the benchmarks and their peers install and run from nothing too).
#     --user NAME: run make as NAME, a user with passwordless sudo (make setup's apt-get goes
#     through sudo), as on a developer's own machine; without it, as root, as in CI.
#
# Needs root, debootstrap (apt-get install debootstrap), the network to Debian's mirror and to the
# npm registry, and a few GB of disk. The CA certificates this machine added
# (/usr/local/share/ca-certificates) are copied in, and the environment is passed through
# (NODE_EXTRA_CA_CERTS, proxies): a machine behind a TLS-inspecting proxy needs both. Logs:
# DIR/TARGET.log for each target; the exit status is make's. demo and test take 10-15 minutes on
# 2 cores.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
user=root
if [ "${1:-}" = --user ]; then
  user=${2:?--user needs a name}
  shift 2
fi
dir=$(realpath -m "${1:-$repo/../fresh-debian12}")
shift $(($# > 0 ? 1 : 0))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(demo test)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$dir/root

die() { echo "fresh-debian12: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, mount, chroot): run it with sudo"
command -v debootstrap >/dev/null || die "needs debootstrap: apt-get install debootstrap"
if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
  die "$dir is not empty: give an empty or absent folder (it is not deleted for you)"
fi
mkdir -p "$root"

# Unmounted on every exit. Before deleting DIR, check that `findmnt | grep DIR` shows nothing:
# rm -rf through a /dev or /sys still bound there would reach this machine's own.
cleanup() {
  umount -R "$root/proc" "$root/sys" "$root/dev" 2>/dev/null || true
  if findmnt -rn -o TARGET | grep -q "^$root/"; then
    echo "fresh-debian12: WARNING: still mounted under $root (findmnt);" \
      "unmount before deleting it" >&2
  fi
}
trap cleanup EXIT

echo "fresh-debian12: debootstrap bookworm into $root"
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$dir/debootstrap.log" 2>&1 ||
  die "debootstrap failed: see $dir/debootstrap.log"
cat > "$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
rm -f "$root/etc/apt/sources.list"
cp /etc/resolv.conf /etc/hosts "$root/etc/"  # names: the mirror's, and this host's for sudo
mkdir -p "$root/usr/local/share/ca-certificates"
cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" 2>/dev/null ||
  true
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
# Slaves: on a host whose / is shared (systemd's default), the cleanup's umount -R of peers would
# unmount this machine's own /dev/pts, /dev/shm and /sys/fs/cgroup too.
mount --make-rslave "$root/sys" "$root/dev"

home=/root
[ "$user" = root ] || home=/home/$user
# run_as WHO COMMAND: a command in the new machine, as root or as $user (with $home): a plain
# PATH, the rest of this environment passed through.
run_as() {
  local h=/root
  [ "$1" = root ] || h=$home
  chroot --userspec="$1:$1" "$root" /usr/bin/env \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="$h" USER="$1" CI=true \
    DEBIAN_FRONTEND=noninteractive /bin/bash -c "$2"
}

echo "fresh-debian12: the bare machine's packages"
run_as root 'apt-get update -q && apt-get install -y -q --no-install-recommends \
  g++ cmake make git python3 ca-certificates && update-ca-certificates' > "$dir/base.log" 2>&1 ||
  die "installing the base packages failed: see $dir/base.log"
if [ "$user" != root ]; then
  run_as root "apt-get install -y -q --no-install-recommends sudo &&
    useradd -m -s /bin/bash $user &&
    echo '$user ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/$user" >> "$dir/base.log" 2>&1 ||
    die "making the user $user failed: see $dir/base.log"
fi
git clone -q "$repo" "$root$home/asyncnd"
echo "fresh-debian12: $(git -C "$root$home/asyncnd" log --oneline -1), as $user"
run_as root "chown -R $user:$user $home/asyncnd"

status=0
for target in "${targets[@]}"; do
  echo "fresh-debian12: make $target (log: $dir/$target.log)"
  start=$SECONDS
  if run_as "$user" "cd $home/asyncnd && make $target" > "$dir/$target.log" 2>&1; then
    echo "fresh-debian12: make $target passed in $((SECONDS - start)) s"
  else
    status=$?
    echo "fresh-debian12: make $target FAILED (exit $status) after $((SECONDS - start)) s;" \
      "the end of $dir/$target.log:"
    tail -20 "$dir/$target.log"
    break
  fi
done
exit $status
