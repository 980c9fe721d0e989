-- Each runner host's place in the fire key of `every: true` jobs (docs/placement.md): a job that
-- runs each fire on every runner has one winner per runner, each in the fire key's `winner`
-- column (a TINYINT, 1..127), so every host gets one slot per namespace, for good. It is given
-- the first time the host contends for such a fire and kept across restarts: a restarted runner
-- claims the same slot, meets its own winner row, and cannot run the same fire twice.
-- A slot is never given back by baton; an operator may delete the row of a host gone for good.
CREATE TABLE baton_host_slots (
  namespace  VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  host       VARCHAR(255) NOT NULL,
  slot       TINYINT UNSIGNED NOT NULL,
  created_at DATETIME(3)  NOT NULL,
  PRIMARY KEY (namespace, host),
  UNIQUE KEY baton_host_slots_slot (namespace, slot)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
