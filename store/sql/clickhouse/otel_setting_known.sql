-- Whether the server knows a setting (a statement naming one it does not know fails).
SELECT name FROM system.settings WHERE name = {name:String}
