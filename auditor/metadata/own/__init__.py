"""bk-auditor's own state in ZooKeeper (`<root>/bk-auditor/...`): one typed recipe for a document or a
directory of documents (`recipe`), the store's primitives for our subtree (`znodes`), and its instances:
check cursors and times (`checkstate`), the references check's seen ledgers (`referencestate`), the repair
role's limits (`repairlimits`) and repair blocks (`repairstate`)."""
