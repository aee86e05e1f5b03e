#!/usr/bin/env bash
# Installs the Debian packages the local stack needs: OpenStack's libraries (no service packages, so no
# prompts and no init scripts), MariaDB, RabbitMQ, Ansible, sshd, containerd, runc and the CNI plugins
# of the real node, and OVN, Open vSwitch and haproxy (the cloud's network, on this machine and on the
# test hosts). Idempotent: exits at once when every package is present. The api-paste.ini files come
# from the *-common packages, unpacked into the cache without installing them.
set -euo pipefail
cache=${STACKFLOW_CACHE:-$HOME/.cache/stackflow}
pkgs=(
  python3-keystone python3-placement python3-glance python3-neutron python3-nova python3-ironic
  python3-pymysql python3-openstackclient python3-ironicclient
  rabbitmq-server mariadb-server uwsgi-core uwsgi-plugin-python3
  ansible-core openssh-server openssh-client iproute2 util-linux procps acct curl qemu-utils
  containerd runc containernetworking-plugins
  ovn-central ovn-host openvswitch-switch haproxy
)
common=(nova-common neutron-common glance-common ironic-common)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo ">> installing Debian packages: ${missing[*]}" >&2
  # No service may start from a package's maintainer scripts: the stack starts its own, on loopback.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
  fi
fi

share=$cache/share/debian-common
if [ ! -f "$share/.done" ]; then
  echo ">> unpacking ${common[*]} (configuration files only)" >&2
  mkdir -p "$share/debs" "$share/root"
  (cd "$share/debs" && apt-get download "${common[@]}")
  for d in "$share"/debs/*.deb; do dpkg-deb -x "$d" "$share/root"; done
  touch "$share/.done"
fi
