# Sourced by scripts/device-kit.sh and scripts/profile-batch.sh: what a
# folder carried to a machine without build tools or network needs.

# kit_libs DIR FILE...: copies into DIR the shared libraries the FILEs
# load (found with ldd), but for the C library, the loader and the C++
# runtime: every x86-64 Linux with Python has them, ours may be newer
# than the binaries need, and mixing two C libraries breaks.
kit_libs() {
  local dir=$1
  shift
  for f in "$@"; do
    ldd "$f" | awk '/=> \// {print $3}'
  done | sort -u | while read -r lib; do
    case $(basename "$lib") in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*) ;;
      *) cp -L "$lib" "$dir/" ;;
    esac
  done
}
