-- Record where the derived tables now stand (a new row version).
INSERT INTO {db:Identifier}.derived_status
    (format, epoch, generation, version, high, recent, partitions)
VALUES ({format:UInt32}, {epoch:String}, {generation:UInt64}, {version:UInt64},
        {high:String}, {recent:String}, {partitions:Array(String)})
