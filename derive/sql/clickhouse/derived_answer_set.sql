-- A kept answer computed at a derived generation.
INSERT INTO {db:Identifier}.derived_answers (name, epoch, generation, version)
VALUES ({name:String}, {epoch:String}, {generation:UInt64},
        toUnixTimestamp64Micro(now64(6)))
