-- +goose Up

-- ENROL credentials sealed for every replica (hub/operations/vault, sealed
-- mode: the hub's --enrol-key-file). AES-256-GCM ciphertext of the
-- driver_info values, bound to the operation id; the key is never stored
-- here. NULL in memory mode and once the node exists or the operation ended:
-- the trigger drops the value on every insert or update that gets there, so
-- no code path can keep it longer.
ALTER TABLE operations ADD COLUMN sealed_driver_info bytea;

-- +goose StatementBegin
CREATE FUNCTION operations_drop_sealed_driver_info() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.sealed_driver_info IS NOT NULL
       AND (NEW.device_id IS NOT NULL OR NEW.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) THEN
        NEW.sealed_driver_info := NULL;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER operations_drop_sealed_driver_info BEFORE INSERT OR UPDATE ON operations
    FOR EACH ROW EXECUTE FUNCTION operations_drop_sealed_driver_info();

-- +goose Down
DROP TRIGGER operations_drop_sealed_driver_info ON operations;
DROP FUNCTION operations_drop_sealed_driver_info();
ALTER TABLE operations DROP COLUMN sealed_driver_info;
