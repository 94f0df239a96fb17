# shellcheck shell=bash
# Sourced by the benchmarks that drive load with wrk: installs Debian's
# package when it is missing (as root, or through sudo).
if ! command -v wrk >/dev/null; then
    echo "installing wrk (Debian package) for the load" >&2
    if ((EUID == 0)); then
        env DEBIAN_FRONTEND=noninteractive apt-get -q -y install --no-install-recommends wrk >/dev/null
    else
        sudo env DEBIAN_FRONTEND=noninteractive apt-get -q -y install --no-install-recommends wrk >/dev/null
    fi
fi
