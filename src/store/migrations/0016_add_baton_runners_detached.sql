-- Why a runner holds its fires as detached from the fleet (daemon/fleet-watch.ts): after a
-- failover it reached a server on which no other runner of the namespace has heartbeated since —
-- a server the fleet has left (an old primary back and writable: a split brain). NULL while the
-- runner is with the fleet. `baton status` makes it a critical finding (`detached`).
ALTER TABLE baton_runners
  ADD COLUMN detached VARCHAR(1000) NULL AFTER db_server
