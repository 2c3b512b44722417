#!/bin/sh
# Bootstrap the build from a clean clone.
#   ./autogen.sh          regenerate configure (autoreconf)
#   ./autogen.sh --deps   first install the Debian packages neki needs to build, when missing
#                         (as root, with apt-get; a no-op when everything is there)
set -e
cd "$(dirname "$0")"
# the tools, plus every Debian package that configure.ac names for a library (so a dependency
# added to configure.ac is installed here without a second list to keep in step)
BUILD_DEPS="autoconf automake libtool pkg-config gcc make $(sed -n \
	-e 's/^NK_REQUIRE_PC(\[[^]]*\], *\[[^]]*\], *\[\([a-z0-9.+-]*\)\]).*/\1/p' \
	-e 's/.*install the Debian package \([a-z0-9][a-z0-9.+-]*\).*/\1/p' configure.ac | sort -u)"
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
