// A 1D diffusion solver as C++ classes, checkpointing its field to one parallel HDF5 file per checkpoint and
// logging with a std::ofstream: the slice must follow member calls (Field::relax, Checkpointer::write), a
// std::vector buffer written through .data(), a reference and an object made with new, a function template,
// and keep the checkpoint loop and the log while dropping the sweeps, the norm and the console output.
//
// usage: diffusion PREFIX CELLS CHECKPOINTS SWEEPS   (CELLS per rank; files PREFIX.<n>.h5 and PREFIX.log)
#include <hdf5.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace sim {

template <typename T>
T at_least(T value, T floor)
{
    return value < floor ? floor : value;
}

class Field {
  public:
    Field(int cells, int rank, int ranks)
        : cells_(cells), rank_(rank), ranks_(ranks), values_(cells + 2, 0.0), next_(cells + 2, 0.0)
    {
    }

    void relax(int sweeps)
    {
        for (int s = 0; s < sweeps; s++) {
            for (int i = 1; i <= cells_; i++)
                next_[i] = 0.5 * values_[i] + 0.25 * (values_[i - 1] + values_[i + 1]) + 1e-3 * (rank_ + 1);
            values_.swap(next_);
        }
    }

    double norm() const;
    const double *interior() const { return values_.data() + 1; }
    hsize_t cells() const { return (hsize_t)cells_; }
    hsize_t offset() const { return (hsize_t)rank_ * cells_; }
    hsize_t total() const { return (hsize_t)ranks_ * cells_; }

  private:
    int cells_, rank_, ranks_;
    std::vector<double> values_, next_;
};

double Field::norm() const
{
    double sum = 0.0;
    for (double v : values_)
        sum += v * v;
    return std::sqrt(sum);
}

class Checkpointer {
  public:
    Checkpointer(const std::string &prefix, MPI_Comm comm) : prefix_(prefix), comm_(comm), bytes_(0) {}

    void write(const Field &field, int step)
    {
        std::string name = prefix_ + "." + std::to_string(step) + ".h5";
        hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
        H5Pset_fapl_mpio(fapl, comm_, MPI_INFO_NULL);
        hid_t file = H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
        hsize_t total = field.total(), count = field.cells(), offset = field.offset();
        hid_t filespace = H5Screate_simple(1, &total, NULL);
        hid_t dset = H5Dcreate2(file, "field", H5T_NATIVE_DOUBLE, filespace, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        hid_t memspace = H5Screate_simple(1, &count, NULL);
        H5Sselect_hyperslab(filespace, H5S_SELECT_SET, &offset, NULL, &count, NULL);
        hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
        H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
        H5Dwrite(dset, H5T_NATIVE_DOUBLE, memspace, filespace, dxpl, field.interior());
        H5Pclose(dxpl);
        H5Sclose(memspace);
        H5Dclose(dset);
        H5Sclose(filespace);
        H5Fclose(file);
        H5Pclose(fapl);
        bytes_ += count * sizeof(double);
    }

    unsigned long bytes() const { return bytes_; }

  private:
    std::string prefix_;
    MPI_Comm comm_;
    unsigned long bytes_;
};

}  // namespace sim

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc != 5) {
        if (rank == 0)
            std::fprintf(stderr, "usage: diffusion PREFIX CELLS CHECKPOINTS SWEEPS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int cells = sim::at_least(std::atoi(argv[2]), 1), checkpoints = std::atoi(argv[3]);
    const int sweeps = std::atoi(argv[4]);
    sim::Field *state = new sim::Field(cells, rank, ranks);
    sim::Field &field = *state;
    sim::Checkpointer checkpointer(argv[1], MPI_COMM_WORLD);
    double norm = 0.0;
    for (int c = 0; c < checkpoints; c++) {
        field.relax(sweeps);
        norm += field.norm();
        checkpointer.write(field, c);
    }
    if (rank == 0) {
        std::ofstream log(std::string(argv[1]) + ".log");
        log << checkpoints << " checkpoints of " << cells * ranks << " cells\n";
        std::cout << checkpoints << " checkpoints, " << checkpointer.bytes() << " bytes from rank 0, norm " << norm
                  << std::endl;
    }
    delete state;
    MPI_Finalize();
    return 0;
}
