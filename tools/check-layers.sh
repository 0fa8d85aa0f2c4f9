#!/usr/bin/env bash
# Checks that no source file includes a header from a higher layer.
#
#   tools/check-layers.sh [SOURCE_ROOT]      (default: src)
#
# Layers, low to high:
#   base < loop < wire < driverproto < nriproto < sdk < proc < cgroup < logs < keeper < plugin < devices < hooks < net < driver < nri < task < job < agent < cli < main
# A file's layer is the first folder of its path below SOURCE_ROOT
# (driver/exec/state.cc is in driver); files directly in SOURCE_ROOT
# (main.cc) are the top layer, "main". A file may include headers of its own
# layer and of lower ones.
#
# Only quoted includes that name a file of the tree count: "job/spec.h" as
# resolved with -ISOURCE_ROOT, or a path relative to the including file.
# Others (system headers, the generated *.pb.h) are not part of any layer.
# A folder missing from the layer list is an error too, so a new folder has
# to be given its place here.
#
# Prints one line per violation, "file:line: <folder> may not include <header>
# (layer X is above Y)", and exits 1; exits 0 with a one-line summary when
# the tree is clean.
set -u

LAYERS=(base loop wire driverproto nriproto sdk proc cgroup logs keeper plugin devices hooks net driver nri task job agent cli main)
TOP=main

root="${1:-src}"
root="${root%/}"
if [ ! -d "$root" ]; then
  echo "check-layers: no such directory: $root" >&2
  exit 2
fi

declare -A RANK
for i in "${!LAYERS[@]}"; do RANK[${LAYERS[$i]}]=$i; done

# The layer of a path relative to the root.
layer_of() {
  case "$1" in
    */*) echo "${1%%/*}" ;;
    *) echo "$TOP" ;;
  esac
}

violations=0 files=0 checked=0
declare -A UNKNOWN_SEEN

# Reports a folder that has no place in the layer order (once per folder).
unknown_folder() {
  local where="$1" folder="$2"
  [ -n "${UNKNOWN_SEEN[$folder]:-}" ] && return
  UNKNOWN_SEEN[$folder]=1
  echo "$where: folder $folder is not in the layer order (${LAYERS[*]}); add it to tools/check-layers.sh"
  violations=$((violations + 1))
}

while IFS= read -r -d '' file; do
  rel="${file#"$root"/}"
  files=$((files + 1))
  from=$(layer_of "$rel")
  if [ -z "${RANK[$from]+x}" ]; then
    unknown_folder "$file" "$from"
    continue
  fi
  dir=.
  [[ "$rel" == */* ]] && dir="${rel%/*}"
  lineno=0
  while IFS= read -r line || [ -n "$line" ]; do
    lineno=$((lineno + 1))
    [[ "$line" =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]] || continue
    header="${BASH_REMATCH[1]}"
    # Resolved as the compiler does: next to the including file first, then
    # from the root (-Isrc).
    target=""
    if [ "$dir" != . ] && [ -f "$root/$dir/$header" ]; then
      target="$dir/$header"
    elif [ -f "$root/$header" ]; then
      target="$header"
    else
      continue
    fi
    [[ "$target" == *..* || "$target" == *./* ]] && target=$(realpath -m --relative-to="$root" "$root/$target")
    to=$(layer_of "$target")
    checked=$((checked + 1))
    if [ -z "${RANK[$to]+x}" ]; then
      unknown_folder "$file:$lineno" "$to"
      continue
    fi
    if [ "${RANK[$to]}" -gt "${RANK[$from]}" ]; then
      echo "$file:$lineno: $from may not include $header (layer $to is above $from)"
      violations=$((violations + 1))
    fi
  done <"$file"
done < <(find "$root" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.c' \) -print0 | sort -z)

if [ "$violations" -gt 0 ]; then
  echo "check-layers: $violations violation(s) in $root"
  exit 1
fi
echo "check-layers: $root clean: $files files, $checked includes of the tree, none upward ($(IFS='<'; echo "${LAYERS[*]}" | sed 's/</ < /g'))"
exit 0
