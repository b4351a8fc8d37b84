#!/usr/bin/env bash
# Creates the operations application credential (issue 13: operations run
# under their own principal) restricted to deploy/openstack/operations-access-rules.yaml,
# with the user's password cloud, and appends it to clouds.yaml as a new cloud.
#
#   scripts/operations-credential.sh CLOUDS_YAML PASSWORD_CLOUD NEW_CLOUD
#
# Needs the openstack CLI (python-openstackclient). CI runs it against the
# test bed; on your own cloud, create the credential the same way (or in
# Horizon) and give the satellite --operations-cloud NEW_CLOUD.
set -euo pipefail
clouds=$1 pw=$2 new=$3
rules=$(cd "$(dirname "$0")/.." && pwd)/deploy/openstack/operations-access-rules.yaml
grep -q "^  $new:" "$clouds" && { echo "cloud $new already in $clouds" >&2; exit 0; }
export OS_CLIENT_CONFIG_FILE=$clouds
out=$(openstack --os-cloud "$pw" application credential create "ironlink-operations-$(date +%s)" \
  --description "ironlink operations (scripts/operations-credential.sh)" \
  --access-rules "$(tr -d '\n' <"$rules")" -f value -c id -c secret)
id=$(sed -n 1p <<<"$out") secret=$(sed -n 2p <<<"$out")
[ -n "$id" ] && [ -n "$secret" ] || { echo "no credential id/secret in: $out" >&2; exit 1; }
auth_url=$(awk -v c="  $pw:" '$0==c{f=1} f&&/auth_url:/{print $2; exit}' "$clouds")
region=$(awk -v c="  $pw:" '$0==c{f=1} f&&/region_name:/{print $2; exit}' "$clouds")
cat >>"$clouds" <<YAML
  $new:
    auth_type: v3applicationcredential
    auth:
      auth_url: $auth_url
      application_credential_id: $id
      application_credential_secret: "$secret"
    region_name: ${region:-RegionOne}
    interface: public
    identity_api_version: 3
YAML
echo "created application credential $id as cloud $new in $clouds" >&2
