#!/usr/bin/env bash
# Regenerates the checked-in Go code of the repo's .proto files.
# Needs protoc and protoc-gen-go (taken from $PROTOC_GEN_GO, ./bin or PATH).
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)

plugin=${PROTOC_GEN_GO:-}
if [[ -z "$plugin" && -x "$root/bin/protoc-gen-go" ]]; then
	plugin="$root/bin/protoc-gen-go"
fi
if [[ -z "$plugin" ]]; then
	plugin=$(command -v protoc-gen-go || true)
fi
if [[ -z "$plugin" ]]; then
	echo "protoc.sh: protoc-gen-go not found (set PROTOC_GEN_GO or run 'make proto')" >&2
	exit 1
fi

gnmi_version=v0.14.1
gnmi_dir="$(go env GOMODCACHE)/github.com/openconfig/gnmi@${gnmi_version}"
if [[ ! -d "$gnmi_dir" ]]; then
	go mod download "github.com/openconfig/gnmi@${gnmi_version}"
fi

# The gnmi .proto files import each other by their Go import path, so expose
# the module under that name.
include=$(mktemp -d)
trap 'rm -rf "$include"' EXIT
mkdir -p "$include/github.com/openconfig"
ln -s "$gnmi_dir" "$include/github.com/openconfig/gnmi"

protos=(journal/journalpb/journal.proto proxy/sidecarpb/sidecar.proto)

protoc \
	--plugin="protoc-gen-go=$plugin" \
	-I "$root" -I "$include" \
	--go_out="$root" --go_opt=module=github.com/gnmi-sidecar/gnmi-sidecar \
	"${protos[@]}"
