#!/bin/sh
# The baton command for operators on a server installed as in deploy/README.md, with the runner's
# settings (its database URL, schedules file and host name) and as the runner's user, so that a
# `baton run` starts the job as the scheduled runs do. Install it as /usr/local/bin/baton and run
# it as root (sudo baton status): baton.env is readable by root only.
#
#   install -m 0755 deploy/baton-cli.sh /usr/local/bin/baton
set -eu
set -a
. /etc/baton/baton.env
set +a
: "${BATON_CONFIG:=/etc/baton/schedules.yaml}"
export BATON_CONFIG
cd /etc/baton
exec runuser -u baton -- /usr/bin/node /opt/baton/dist/cli/main.js "$@"
