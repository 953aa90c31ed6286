#!/bin/sh
# Install the optional extra CA bundle that the builder drops into the build context as
# `extra-ca.pem` (CAGE_EXTRA_CA_CERTS; networks with TLS inspection). Without it: nothing to do.
# Every images/<runner>/ folder holds an identical copy, so the layers stay shared (a test checks).
set -eu
src=/tmp/cage-ca/extra-ca.pem
if [ -s "$src" ]; then
    dest=/usr/local/share/ca-certificates/cage-extra
    mkdir -p "$dest"
    # update-ca-certificates wants one certificate per file: split the bundle.
    awk -v dest="$dest" '
        /-----BEGIN CERTIFICATE-----/ { n++; out = sprintf("%s/cert-%04d.crt", dest, n) }
        out != "" { print > out }
        /-----END CERTIFICATE-----/ { close(out); out = "" }
    ' "$src"
    update-ca-certificates >/dev/null
fi
rm -rf /tmp/cage-ca
