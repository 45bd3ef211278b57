#!/usr/bin/env bash
# check_symbols.sh NM LIBBRAID: libbraid.so exports exactly braid's public API.
#   - every defined dynamic symbol is a C function braid* or a symbol of a public class/function
#     of namespace braid (include/braid/), in the version node BRAID_0;
#   - none is internal (braid::detail, transports, topology, selector, Impl classes, std::);
#   - the API a consumer needs is there (a few C and C++ entry points by name);
#   - the SONAME is libbraid.so.0.
# Prints the count of exported symbols by kind.
set -euo pipefail
nm=$1
lib=$2
fail=0
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libbraid.so.0" ] || { echo "FAIL: SONAME is '$soname', want libbraid.so.0"; fail=1; }

defined=$("$nm" -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
# Demangled, one per line, side by side with the raw name.
public_re='^(braid[A-Z][A-Za-z0-9_]*|braid::(Communicator|Bucketer)::([a-z~]|Communicator|Bucketer)|braid::(Work|Status)::|(typeinfo|typeinfo name|vtable) for braid::Work$|braid::(codeName|systemError|internalError|invalidArgument|invalidUsage|remoteError|timeoutError|errnoError|collectiveName|dataTypeSize|dataTypeName|reduceOpName|parseDataType|parseReduceOp|isValid|isFloatingPoint|stepMetricsJson|stepMetricsPrometheus)(\[abi:cxx11\])?\(|BRAID_0$)'
c=0; cxx=0; bad=0
while IFS= read -r raw; do
  [ -n "$raw" ] || continue
  name=$(echo "$raw" | c++filt)
  if [[ "$name" =~ $public_re ]]; then
    if [[ "$raw" == braid* ]]; then c=$((c + 1)); elif [[ "$raw" != BRAID_0 ]]; then cxx=$((cxx + 1)); fi
  else
    echo "FAIL: exported but not public: $name"
    bad=$((bad + 1))
  fi
done <<<"$defined"
[ "$bad" -eq 0 ] || fail=1
for required in braidCommInitFromEnv braidAllReduce braidBucketerCreate braidCommDestroy \
                braidGetErrorString; do
  grep -qx "$required" <<<"$defined" || { echo "FAIL: $required is not exported"; fail=1; }
done
demangled=$(c++filt <<<"$defined")
for required in 'braid::Communicator::createFromEnvironment()' 'braid::Communicator::allReduce(' \
                'braid::Bucketer::create(' 'braid::Status::toString'; do
  grep -qF "$required" <<<"$demangled" || { echo "FAIL: $required is not exported"; fail=1; }
done
if grep -qE '^((typeinfo|typeinfo name|vtable) for )?braid::(detail|transport|topo|Communicator::Impl|Bucketer::Impl)::' <<<"$demangled"; then
  echo "FAIL: internal symbols exported"; fail=1
fi
echo "libbraid.so exports $((c + cxx)) symbols: $c C (braid*), $cxx C++ (braid:: public API); SONAME $soname"
exit $fail
