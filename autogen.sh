#!/bin/sh
# Bootstrap the build from a clean clone.
#   ./autogen.sh          regenerate configure (autoreconf)
#   ./autogen.sh --deps   first install the Debian packages neki needs to build, when missing
#                         (as root, with apt-get; a no-op when everything is there)
set -e
cd "$(dirname "$0")"
BUILD_DEPS="autoconf automake libtool pkg-config gcc make libevent-dev libc-ares-dev libssl-dev
libpq-dev libxxhash-dev libcjson-dev check libpg-query-dev libicu-dev"
if [ "${1:-}" = "--deps" ]; then
	missing=""
	for p in $BUILD_DEPS; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		echo "autogen.sh: installing$missing"
		if [ "$(id -u)" != 0 ]; then
			echo "autogen.sh: run as root (or: sudo apt-get install$missing)" >&2
			exit 1
		fi
		# refresh the package lists unless that happened in the last two hours (and again if
		# the install fails on stale lists)
		[ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -120 2>/dev/null | head -n 1)" ] ||
			apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null ||
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null; }
	fi
fi
autoreconf -fi >/dev/null
