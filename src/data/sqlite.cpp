// SqliteDataset's storage: reading blobs through a pool of read-only connections (SQLite
// connections must not be shared between threads without its global lock) and writing a new
// database under a temporary name that commit() renames into place.
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>

#include "ember/data/sqlite.hpp"
#include "ember/record/untrusted.hpp"

namespace ember::data::detail {

namespace {

constexpr const char* kFormat = "ember-sqlite-dataset";
constexpr const char* kVersion = "1";

/// Closes a connection (and its statements) on scope exit.
struct Db {
    sqlite3* db = nullptr;
    ~Db() { sqlite3_close_v2(db); }
};
/// Finalises a statement on scope exit.
struct Stmt {
    sqlite3_stmt* s = nullptr;
    ~Stmt() { sqlite3_finalize(s); }
};

/// SQLite's message for the last error. It may quote the database's own schema (table and
/// column names of a file someone else made), so its control bytes are escaped.
std::string errmsg(sqlite3* db) {
    return db ? record::printable(sqlite3_errmsg(db)) : "out of memory";
}

/// A path or a name as error messages show it (record::printable: no raw control bytes).
std::string shown(const std::filesystem::path& file) {
    return record::printable(file.string(), 4096);
}
std::string shown_name(std::string_view name) {
    return record::printable(name);
}

/// Opens `file` read-only and checks that it is an ember dataset of a version this reads.
sqlite3* open_dataset(const std::filesystem::path& file) {
    EMBER_CHECK(std::filesystem::is_regular_file(file), Format, "SqliteDataset: ", shown(file),
                ": no such file (write one with SqliteDatasetWriter)");
    Db db;
    const int rc =
        sqlite3_open_v2(file.c_str(), &db.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
    EMBER_CHECK(rc == SQLITE_OK, Format, "SqliteDataset: ", shown(file), ": cannot open (",
                errmsg(db.db), ")");
    Stmt st;
    if (sqlite3_prepare_v2(db.db, "SELECT key, value FROM ember_dataset", -1, &st.s, nullptr) !=
        SQLITE_OK) {
        EMBER_FAIL(Format, "SqliteDataset: ", shown(file), ": not an ember dataset file (",
                   errmsg(db.db), "); write one with SqliteDatasetWriter");
    }
    std::map<std::string, std::string> meta;
    int step;
    while ((step = sqlite3_step(st.s)) == SQLITE_ROW) {
        const auto* k = sqlite3_column_text(st.s, 0);
        const auto* v = sqlite3_column_text(st.s, 1);
        if (k && v) meta[reinterpret_cast<const char*>(k)] = reinterpret_cast<const char*>(v);
    }
    EMBER_CHECK(step == SQLITE_DONE, Format, "SqliteDataset: ", shown(file), ": ", errmsg(db.db));
    EMBER_CHECK(meta["format"] == kFormat, Format, "SqliteDataset: ", shown(file),
                ": not an ember dataset file (format '", shown_name(meta["format"]), "')");
    EMBER_CHECK(meta["version"] == kVersion, Format, "SqliteDataset: ", shown(file),
                ": dataset format version '", shown_name(meta["version"]),
                "', this build reads version ", kVersion);
    sqlite3* out = db.db;
    db.db = nullptr;
    return out;
}

/// Runs SQL that returns no rows; throws `kind` errors with `what` on failure.
void exec(sqlite3* db, const char* sql, const std::string& what) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
        std::string msg = err ? err : errmsg(db);
        sqlite3_free(err);
        EMBER_FAIL(Argument, what, ": ", msg);
    }
}

/// A pooled read connection with its prepared row query.
struct Conn {
    Db db;
    Stmt stmt;
};

}  // namespace

struct SqliteReader::Impl {
    std::filesystem::path file;
    std::string split;
    std::size_t len = 0;
    std::mutex mutex;
    std::vector<std::unique_ptr<Conn>> idle;

    std::unique_ptr<Conn> connect() {
        auto c = std::make_unique<Conn>();
        c->db.db = open_dataset(file);
        const char* sql = "SELECT item FROM items WHERE split = ?1 AND row_id = ?2";
        EMBER_CHECK(sqlite3_prepare_v2(c->db.db, sql, -1, &c->stmt.s, nullptr) == SQLITE_OK, Format,
                    "SqliteDataset: ", shown(file), ": ", errmsg(c->db.db));
        return c;
    }
};

SqliteReader::SqliteReader(std::filesystem::path file, std::string split)
    : impl_(std::make_unique<Impl>()) {
    impl_->file = std::move(file);
    impl_->split = std::move(split);
    auto conn = impl_->connect();
    Stmt st;
    const char* sql = "SELECT COUNT(*), MAX(row_id) FROM items WHERE split = ?1";
    EMBER_CHECK(sqlite3_prepare_v2(conn->db.db, sql, -1, &st.s, nullptr) == SQLITE_OK, Format,
                "SqliteDataset: ", shown(impl_->file), ": ", errmsg(conn->db.db));
    sqlite3_bind_text(st.s, 1, impl_->split.data(), static_cast<int>(impl_->split.size()),
                      SQLITE_STATIC);
    EMBER_CHECK(sqlite3_step(st.s) == SQLITE_ROW, Format, "SqliteDataset: ", shown(impl_->file),
                ": ", errmsg(conn->db.db));
    const auto count = sqlite3_column_int64(st.s, 0);
    if (count == 0) {
        std::string names;
        for (const auto& s : splits(impl_->file))
            names += (names.empty() ? "'" : ", '") + shown_name(s) + "'";
        EMBER_FAIL(Argument, "SqliteDataset: ", shown(impl_->file), " has no split '",
                   shown_name(impl_->split), "' (splits: ", names.empty() ? "none" : names, ")");
    }
    // Rows must be numbered 0..count-1, else get(i) would miss rows.
    EMBER_CHECK(sqlite3_column_int64(st.s, 1) == count - 1, Format,
                "SqliteDataset: ", shown(impl_->file), ": split '", shown_name(impl_->split),
                "' has ", count, " rows whose indices are not 0..", count - 1);
    impl_->len = static_cast<std::size_t>(count);
    impl_->idle.push_back(std::move(conn));
}

SqliteReader::~SqliteReader() = default;

std::size_t SqliteReader::len() const {
    return impl_->len;
}
const std::filesystem::path& SqliteReader::file() const {
    return impl_->file;
}
const std::string& SqliteReader::split() const {
    return impl_->split;
}

std::vector<std::byte> SqliteReader::blob(std::size_t index) const {
    std::unique_ptr<Conn> c;
    {
        std::lock_guard lock(impl_->mutex);
        if (!impl_->idle.empty()) {
            c = std::move(impl_->idle.back());
            impl_->idle.pop_back();
        }
    }
    if (!c) c = impl_->connect();  // one per concurrent reader, kept for later
    sqlite3_stmt* s = c->stmt.s;
    sqlite3_reset(s);
    sqlite3_bind_text(s, 1, impl_->split.data(), static_cast<int>(impl_->split.size()),
                      SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>(index));
    const int rc = sqlite3_step(s);
    std::vector<std::byte> out;
    std::string error;
    if (rc == SQLITE_ROW) {
        const auto* p = static_cast<const std::byte*>(sqlite3_column_blob(s, 0));
        out.assign(p, p + sqlite3_column_bytes(s, 0));
    } else {
        error = rc == SQLITE_DONE ? std::string("the row is missing") : errmsg(c->db.db);
    }
    sqlite3_reset(s);
    {
        std::lock_guard lock(impl_->mutex);
        impl_->idle.push_back(std::move(c));
    }
    EMBER_CHECK(error.empty(), Format, "SqliteDataset: ", shown(impl_->file), " [",
                shown_name(impl_->split), " row ", index, "]: ", error);
    return out;
}

std::vector<std::string> SqliteReader::splits(const std::filesystem::path& file) {
    Db db;
    db.db = open_dataset(file);
    Stmt st;
    EMBER_CHECK(sqlite3_prepare_v2(db.db, "SELECT DISTINCT split FROM items ORDER BY split", -1,
                                   &st.s, nullptr) == SQLITE_OK,
                Format, "SqliteDataset: ", shown(file), ": ", errmsg(db.db));
    std::vector<std::string> out;
    while (sqlite3_step(st.s) == SQLITE_ROW) {
        // A file not written by SqliteDatasetWriter may hold a NULL split: no name to list.
        const auto* name = sqlite3_column_text(st.s, 0);
        if (name) out.emplace_back(reinterpret_cast<const char*>(name));
    }
    return out;
}

struct SqliteWriter::Impl {
    std::filesystem::path file, tmp;
    Db db;
    Stmt insert;
    std::map<std::string, std::size_t, std::less<>> lens;
    bool committed = false;
};

SqliteWriter::SqliteWriter(std::filesystem::path file, bool overwrite)
    : impl_(std::make_unique<Impl>()) {
    EMBER_CHECK(overwrite || !std::filesystem::exists(file), Argument,
                "SqliteDatasetWriter: ", shown(file),
                " already exists (pass overwrite = true to replace it)");
    static std::atomic<unsigned> counter{0};
    impl_->file = file;
    impl_->tmp = file;
    impl_->tmp += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    std::filesystem::remove(impl_->tmp);
    const std::string what = "SqliteDatasetWriter: " + shown(file);
    const int rc = sqlite3_open_v2(impl_->tmp.c_str(), &impl_->db.db,
                                   SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    if (rc != SQLITE_OK) {
        const std::string msg = errmsg(impl_->db.db);
        sqlite3_close_v2(impl_->db.db);
        impl_->db.db = nullptr;
        std::filesystem::remove(impl_->tmp);
        EMBER_FAIL(Argument, what, ": cannot create ", shown(impl_->tmp), " (", msg, ")");
    }
    try {
        // The file is private until the rename: no need for a journal on disk.
        exec(impl_->db.db, "PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF;", what);
        exec(impl_->db.db,
             "BEGIN;"
             "CREATE TABLE ember_dataset (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
             "INSERT INTO ember_dataset VALUES ('format', 'ember-sqlite-dataset'),"
             " ('version', '1'), ('encoding', 'NamedMpk');"
             "CREATE TABLE items (split TEXT NOT NULL, row_id INTEGER NOT NULL,"
             " item BLOB NOT NULL, PRIMARY KEY (split, row_id));",
             what);
        EMBER_CHECK(sqlite3_prepare_v2(impl_->db.db, "INSERT INTO items VALUES (?1, ?2, ?3)", -1,
                                       &impl_->insert.s, nullptr) == SQLITE_OK,
                    Argument, what, ": ", errmsg(impl_->db.db));
    } catch (...) {
        sqlite3_finalize(impl_->insert.s);
        impl_->insert.s = nullptr;
        sqlite3_close_v2(impl_->db.db);
        impl_->db.db = nullptr;
        std::filesystem::remove(impl_->tmp);
        throw;
    }
}

SqliteWriter::~SqliteWriter() {
    if (impl_->committed) return;
    sqlite3_finalize(impl_->insert.s);
    impl_->insert.s = nullptr;
    sqlite3_close_v2(impl_->db.db);
    impl_->db.db = nullptr;
    std::error_code ec;
    std::filesystem::remove(impl_->tmp, ec);
}

std::size_t SqliteWriter::append(std::string_view split, std::span<const std::byte> blob) {
    EMBER_CHECK(!impl_->committed, Argument, "SqliteDatasetWriter: ", shown(impl_->file),
                ": write after commit");
    EMBER_CHECK(!split.empty(), Argument, "SqliteDatasetWriter: ", shown(impl_->file),
                ": the split name is empty");
    auto it = impl_->lens.find(split);
    if (it == impl_->lens.end()) it = impl_->lens.emplace(std::string(split), 0).first;
    sqlite3_stmt* s = impl_->insert.s;
    sqlite3_reset(s);
    sqlite3_bind_text(s, 1, split.data(), static_cast<int>(split.size()), SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>(it->second));
    // An empty blob must still be a blob (zeroblob), not NULL.
    if (blob.empty())
        sqlite3_bind_zeroblob(s, 3, 0);
    else
        sqlite3_bind_blob64(s, 3, blob.data(), blob.size(), SQLITE_STATIC);
    const int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    EMBER_CHECK(rc == SQLITE_DONE, Argument, "SqliteDatasetWriter: ", shown(impl_->file),
                ": cannot insert row ", it->second, " of split '", shown_name(split),
                "': ", errmsg(impl_->db.db));
    return it->second++;
}

std::size_t SqliteWriter::len(std::string_view split) const {
    const auto it = impl_->lens.find(split);
    return it == impl_->lens.end() ? 0 : it->second;
}

void SqliteWriter::commit() {
    EMBER_CHECK(!impl_->committed, Argument, "SqliteDatasetWriter: ", shown(impl_->file),
                ": committed twice");
    const std::string what = "SqliteDatasetWriter: " + shown(impl_->file);
    sqlite3_finalize(impl_->insert.s);
    impl_->insert.s = nullptr;
    exec(impl_->db.db, "COMMIT;", what);
    const int rc = sqlite3_close_v2(impl_->db.db);
    impl_->db.db = nullptr;
    EMBER_CHECK(rc == SQLITE_OK, Argument, what, ": cannot close the database");
    // synchronous = OFF skipped SQLite's fsyncs: flush once, before the rename publishes it.
    const int fd = ::open(impl_->tmp.c_str(), O_RDONLY);
    const bool synced = fd >= 0 && ::fsync(fd) == 0;
    if (fd >= 0) ::close(fd);
    std::error_code ec;
    if (synced) std::filesystem::rename(impl_->tmp, impl_->file, ec);
    if (!synced || ec) {
        std::filesystem::remove(impl_->tmp, ec);
        EMBER_FAIL(Argument, what, ": cannot move the finished database into place");
    }
    impl_->committed = true;
}

}  // namespace ember::data::detail
